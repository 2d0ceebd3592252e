"""Which kind of work a kernel (GPU) or an op (CPU) is, by its name. Two classifiers, on purpose:

- :func:`classify` — the **step benchmark's** groups (``GROUPS``: matmul, attention-softmax, elementwise,
  normalisation, optimizer, other) for the kernels *and the CPU ops* (``aten::mm``…) of the lab's own
  Transformer, with the phase deciding optimizer time. ``GROUPS`` are columns of stored step-bench runs and
  chart colours, so they stay as they are (old runs still open). Names are matched as lower-case
  substrings, first group wins.
- :func:`classify_kernel` — the **trace analysis'** groups (``KERNEL_GROUPS``) for GPU kernel names from any
  workload and vendor: matmul, convolution, attention, communication, memory, normalisation, embedding,
  reduction, elementwise, other. Each group is reached through named rules (``KERNEL_RULES``, regular
  expressions over the lower-cased name, first rule wins), and a trace run reports what every rule
  matched (count and µs), so a wrong group can be seen and traced to its rule. The rules are ordered so
  that a library's name never wins over what the kernel does: ``fbgemm`` (FBGEMM's GPU sparse and
  quantisation ops, no GEMM) comes before the ``gemm`` rules, an implicit-GEMM *convolution* before the
  GEMM rules (AMD Composable Kernel's ``kernel_grouped_conv_fwd_…<ck::GridwiseGemm…>`` names a GEMM in its template
  arguments, MIOpen's ``naive_conv_…`` and ``igemm_fwd_…`` too), a flash-attention kernel built on CUTLASS before
  ``cutlass``, cuDNN batch norm before cuDNN. Mixture-of-experts serving kernels come first: an expert GEMM's name
  carries words other rules take (TensorRT-LLM-gen's ``bmm_…_bN_…swiGlu``), the routing and finalize kernels carry
  ``cutlass::`` in their types, and every flashinfer kernel ``flashinfer::`` (its RMSNorm, RoPE, activations and
  quantiser are not attention: only its prefill, decode and merge kernels are). A kernel no rule names is "other",
  never a guess.

A trace's optimizer kernels (``multi_tensor_apply``, fused Adam) are elementwise there: a trace has no phases.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

GROUPS = ("matmul", "attention-softmax", "elementwise", "normalisation", "optimizer", "other")
ANNOTATION = "gpulab:"  # the step benchmark's own record_function ranges
HOST_GAP_NAME = "(host: Python and dispatch between ops)"

_LOSS = ("log_softmax", "logsoftmax", "nll_loss", "cross_entropy")
_SOFTMAX = ("softmax", "masked_fill", "triu")
_MATMUL = (
    "gemm",
    "gemv",
    "cutlass",
    "xmma",
    "nvjet",
    "cublas",
    "splitkreduce",
    "aten::mm",
    "aten::bmm",
    "aten::addmm",
    "aten::matmul",
    "aten::linear",
    "aten::baddbmm",
)
_NORM = ("rsqrt", "norm", "aten::mean", "meanops", "pow")
_ELEMENTWISE = (
    "elementwise",
    "vectorized",
    "unrolled",
    "silu",
    "sigmoid",
    "copy",
    "fill",
    "aten::add",
    "aten::mul",
    "aten::div",
    "aten::sub",
    "aten::neg",
    "aten::exp",
    "aten::cat",
    "catarray",
    "aten::stack",
    "aten::where",
    "aten::clone",
    "aten::cos",
    "aten::sin",
    "aten::ones",
    "aten::zero",
    "aten::sum",
    "aten::slice_backward",
    "aten::contiguous",
    "aten::to",
)
_OPTIMIZER = ("optimizer.", "adam", "sgd", "_foreach")


def classify(name: str, phase: str | None) -> str:
    """Group of a kernel (GPU) or op (CPU) by its name, and by phase for the optimizer's work.

    Everything launched during optimizer.step/zero_grad is optimizer time (its kernels are plain
    element-wise ones). The model writes RMSNorm out of pow/mean/rsqrt, which are matched as
    normalisation; its multiplies land in elementwise. Autograd wrappers (``…Backward0``) only hold
    dispatch overhead — their kernels are counted under the ops they call.
    """
    if phase in ("optimizer", "zero_grad"):
        return "optimizer"
    low = name.lower()
    if (
        low.startswith(ANNOTATION)
        or name == HOST_GAP_NAME
        or "autograd::" in low
        or low.rstrip("0123456789").endswith("backward")
    ):
        return "other"
    for group, patterns in (
        ("optimizer", _OPTIMIZER),
        ("other", _LOSS),
        ("attention-softmax", _SOFTMAX),
        ("matmul", _MATMUL),
        ("normalisation", _NORM),
        ("elementwise", _ELEMENTWISE),
    ):
        if any(p in low for p in patterns):
            return group
    return "other"


# -- GPU kernel names from any trace (the trace analysis) ------------------------------------------------

KERNEL_GROUPS = (
    "matmul",
    "convolution",
    "attention",
    "communication",
    "memory",
    "normalisation",
    "embedding",
    "reduction",
    "elementwise",
    "other",
)
NO_RULE = "no rule matched"


class KernelRule(NamedTuple):
    """One named rule: a kernel whose lower-cased name matches ``pattern`` (re.search) is in ``group``."""

    rule: str
    group: str
    pattern: str
    example: str  # a real kernel name it matches (tests check every rule matches its example)


# Collectives named in a kernel's name in which every rank receives from every other (a send/recv pairs any two)
EVERY_RANK_BY_NAME = r"all_?reduce|all_?gather|reduce_?scatter"

KERNEL_RULES: tuple[KernelRule, ...] = (
    KernelRule(
        "NCCL/RCCL kernels",
        "communication",
        r"nccl|rccl|msccl",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    ),
    KernelRule(
        "collective by name",
        "communication",
        EVERY_RANK_BY_NAME + r"|all_?to_?all|sendrecv",
        "void c10d::intra_node_comm::oneShotAllReduceKernel<4>(c10d::intra_node_comm::AllReduceParams)",
    ),
    # Mixture-of-experts serving (vLLM, SGLang, TensorRT-LLM, on Hopper, Blackwell and MI300): the expert GEMMs
    # first, whose names carry words other rules take (``_bN_`` and ``swiGlu`` in a TensorRT-LLM-gen ``bmm_``), then
    # the routing and finalize kernels around them, which move and weigh tokens and run no GEMM.
    KernelRule(
        "TensorRT-LLM-gen batched GEMMs (bmm_…: MoE experts)",
        "matmul",
        r"^bmm_",
        "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
        "schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
    ),
    KernelRule(
        "Triton MoE GEMMs (triton_kernels' matmul_ogs, vLLM/SGLang fused_moe_kernel)",
        "matmul",
        r"matmul_ogs|fused_moe_kernel",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
    ),
    KernelRule(
        "DeepGEMM (fp8 GEMMs, grouped MoE GEMMs)",
        "matmul",
        r"deep_?gemm::|sm90_fp8_gemm|sm100_fp8_gemm|m_grouped_fp8",
        "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 160u, 128u, 0u, 64u, 9u, 4u, 128u, 128u, 1u, true, "
        "(deep_gemm::GemmType)1>(__nv_bfloat16*, float*, int*, unsigned int, CUtensorMap_st, CUtensorMap_st, "
        "CUtensorMap_st, CUtensorMap_st)",
    ),
    KernelRule(
        "grouped MoE GEMMs (CUTLASS MoeFCGemm, CK/aiter MoE GEMMs)",
        "matmul",
        r"moe_?fc_?gemm|moe_?gemm|fmoe_|grouped_?gemm",
        "void cutlass::Kernel<cutlass::gemm::kernel::MoeFCGemm<cutlass::gemm::threadblock::MmaMultistage<cutlass::"
        "gemm::GemmShape<128, 128, 64>>, cutlass::epilogue::threadblock::Epilogue<cutlass::gemm::GemmShape<128, 128, "
        "64>>, cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle, cutlass::arch::Sm80, "
        "(cutlass::gemm::kernel::GroupScheduleMode)0>>",
    ),
    KernelRule(
        "MoE routing and finalize (top-k, expert histograms and offsets, weighted sum: no GEMM)",
        "elementwise",
        r"moe::dev::|(?:vllm|sglang)::moe::|routing(?:indices|renormalize|deepseek|llama4)|_combined_routing"
        r"|topkgating|_topk_forward|grouped_topk|_sum_bitmatrix|moe_?align|moe_?sort|expandinputrows|finalize_?moe"
        r"|finalize.*scatter|_finalize_matmul",
        "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, "
        "cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, "
        "true>)",
    ),
    KernelRule(
        "KV-cache writes (reshape_and_cache, store_kvcache)",
        "elementwise",
        r"reshape_and_cache|concat_and_cache|store_kv_?cache",
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>"
        "(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long, long, long, "
        "long, long, int, int, int, float const*, float const*)",
    ),
    KernelRule(
        "rotary position embedding (RoPE)",
        "elementwise",
        r"rotary|(?:^|[^a-z])rope(?:[^a-z]|$)",
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, "
        "c10::BFloat16 const*, int, long, long, long, int, int, int)",
    ),
    KernelRule(
        "gated activations (SiLU/GELU and mul, SwiGLU)",
        "elementwise",
        r"act_and_mul|silu_and_mul|gelu_and_mul|swiglu|geglu",
        "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
    ),
    KernelRule(
        "embedding lookups (TBE, embedding_bag)",
        "embedding",
        r"embedding|permute_pooled_embs|bounds_check_indices|linearize_index",
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>",
    ),
    KernelRule(
        "fbgemm_gpu ops (sparse permutes, FP8 quantize: no GEMM)",
        "elementwise",
        r"fbgemm",
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int)",
    ),
    KernelRule(
        "normalisation (layer/RMS/batch/group norm)",
        "normalisation",
        r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|(?:^|[^a-z])bn_(?:fw|bw)"
        r"|rowwisemoments|gammabeta",
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
    ),
    KernelRule(
        "attention (flash, fmha, SDPA, attn; flashinfer's prefill, decode and merge)",
        "attention",
        r"flash(?!infer)|fmha|(?:^|[^a-z])mha_|scaled_dot_product|sdpa|attn|attention|sage_fwd"
        r"|prefillwith|decodewith|mergestates",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>>",
    ),
    KernelRule(
        "softmax (unfused attention; a loss's softmax too)",
        "attention",
        r"softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 1, false, false>",
    ),
    KernelRule(
        "quantisation (casts to fp8/fp4 with scales)",
        "elementwise",
        r"quant",
        "void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
        "c10::BFloat16 const*, float const*, int, long, long, long, long)",
    ),
    KernelRule(
        "convolution (implicit GEMM fprop/dgrad/wgrad, Winograd, conv, CK/MIOpen conv)",
        "convolution",
        r"convol|conv_?[123]d|depthwise|implicit_?gemm|fprop|dgrad|wgrad|winograd|igemm"
        r"|conv_(?:fwd|bwd|wrw)|naive_conv|xdlops_bwd_weight",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
    ),
    KernelRule(
        "cuDNN/MIOpen library kernels (layout transforms, FFT)",
        "convolution",
        r"cudnn|miopen|fft2d|nchwtonhwc|nhwctonchw",
        "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
    ),
    KernelRule(
        "cuBLAS/cuBLASLt (gemv, split-K reduce, epilogue)",
        "matmul",
        r"cublas|gemv|splitkreduce|gemmk1|gemmsn",
        "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>)",
    ),
    KernelRule(
        "AMD Tensile/hipBLASLt (Cijk_)",
        "matmul",
        r"(?:^|[^a-z0-9])cijk_|tensile|hipblaslt",
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_ISA90a",
    ),
    KernelRule(
        "CUTLASS",
        "matmul",
        r"cutlass",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>",
    ),
    KernelRule(
        "NVIDIA GEMM kernels (xmma, nvjet, sgemm/hgemm, gemm)",
        "matmul",
        r"xmma|nvjet|gemm",
        "ampere_sgemm_128x64_nn",
    ),
    KernelRule(
        "Triton matmul template",
        "matmul",
        r"triton_tem_fused_(?:add)?b?mm",
        "triton_tem_fused_mm_0",
    ),
    KernelRule(
        "reductions (reduce, Triton red/per)",
        "reduction",
        r"reduce|triton_(?:red|per)_|argmax|argmin",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
    ),
    KernelRule(
        "elementwise (PyTorch elementwise kernels, Triton pointwise)",
        "elementwise",
        r"elementwise|vectorized|unrolled|triton_poi_",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    ),
    KernelRule(
        "data movement (cat, copy, fill, index, gather/scatter, multi_tensor_apply)",
        "elementwise",
        r"catarray|copy|fill|index|gather|scatter|multi_tensor_apply|foreach|dropout|transpose",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>",
    ),
)
_KERNEL_PATTERNS = tuple((r.rule, r.group, re.compile(r.pattern)) for r in KERNEL_RULES)


@functools.lru_cache(maxsize=1 << 14)
def classify_kernel(name: str) -> tuple[str, str]:
    """(group, rule) of a GPU kernel by its name: the first rule of ``KERNEL_RULES`` that matches, else
    ("other", NO_RULE). Remembered: a trace's kernel groups and its op breakdown each ask for every distinct name,
    the ranks of one job share theirs, and a templated name of hundreds of characters takes up to 27 searches."""
    low = name.lower()
    for rule, group, pattern in _KERNEL_PATTERNS:
        if pattern.search(low):
            return group, rule
    return "other", NO_RULE
