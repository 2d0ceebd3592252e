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
  ``cutlass``, cuDNN batch norm before cuDNN.

A trace's optimizer kernels (``multi_tensor_apply``, fused Adam) are elementwise there: a trace has no phases.
"""

from __future__ import annotations

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
        "attention (flash, fmha, SDPA, attn)",
        "attention",
        r"flash|fmha|scaled_dot_product|sdpa|attn|attention",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>>",
    ),
    KernelRule(
        "softmax (unfused attention; a loss's softmax too)",
        "attention",
        r"softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 1, false, false>",
    ),
    KernelRule(
        "normalisation (layer/RMS/batch/group norm)",
        "normalisation",
        r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|(?:^|[^a-z])bn_|rowwisemoments|gammabeta",
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
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
        "Triton MoE GEMMs (triton_kernels' matmul_ogs, vLLM/SGLang fused_moe_kernel)",
        "matmul",
        r"matmul_ogs|fused_moe_kernel",
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
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


def classify_kernel(name: str) -> tuple[str, str]:
    """(group, rule) of a GPU kernel by its name: the first rule of ``KERNEL_RULES`` that matches, else
    ("other", NO_RULE)."""
    low = name.lower()
    for rule, group, pattern in _KERNEL_PATTERNS:
        if pattern.search(low):
            return group, rule
    return "other", NO_RULE
