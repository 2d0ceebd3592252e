"""The groups kernel time is reported in: kernel and op names of cuBLAS, cuDNN, Triton and ATen."""

import pytest

from core.measure.kernels import GROUPS, HOST_GAP_NAME, classify


def test_classify_known_names():
    assert classify("ampere_sgemm_128x64_tn", "forward") == "matmul"
    assert classify("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "backward") == "matmul"
    assert classify("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "forward") == "matmul"
    assert (
        classify("void (anonymous namespace)::softmax_warp_forward<float, float, float, 7, false, false>", "forward")
        == "attention-softmax"
    )
    assert (
        classify(
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>",
            "forward",
        )
        == "other"
    )
    assert (
        classify(
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
            "float, float, float>, unsigned int, float, 4> >",
            "forward",
        )
        == "normalisation"
    )
    assert (
        classify("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "forward")
        == "elementwise"
    )
    # the same element-wise kernel launched by optimizer.step is optimizer time
    assert (
        classify("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "optimizer")
        == "optimizer"
    )
    assert classify("aten::mm", "backward") == "matmul"
    assert classify("autograd::engine::evaluate_function: MmBackward0", "backward") == "other"
    assert classify("SoftmaxBackward0", "backward") == "other"
    assert classify("Memcpy HtoD (Pageable -> Device)", None) == "other"


def test_cpu_op_names():
    assert classify("aten::addmm", "forward") == "matmul"
    assert classify("aten::rsqrt", "forward") == "normalisation"
    assert classify("aten::mul", "backward") == "elementwise"
    assert classify("aten::_softmax", "forward") == "attention-softmax"
    assert classify("aten::nll_loss_forward", "forward") == "other"  # the loss, not the attention's softmax
    assert classify("Optimizer.step#AdamW.step", None) == "optimizer"
    assert classify("aten::unknown_op", "forward") == "other"


def test_the_phase_decides_for_the_optimizers_plain_kernels():
    assert classify("aten::mul", "optimizer") == "optimizer" and classify("aten::fill_", "zero_grad") == "optimizer"


def test_annotations_and_autograd_wrappers_hold_no_work_of_their_own():
    assert classify("gpulab:phase:forward", "forward") == "other"
    assert classify(HOST_GAP_NAME, "forward") == "other"
    assert classify("MulBackward0", "backward") == "other"
    assert GROUPS[-1] == "other" and len(set(GROUPS)) == 6


def test_every_kernel_rule_matches_its_own_example_first():
    from core.measure.kernels import KERNEL_GROUPS, KERNEL_RULES, classify_kernel

    for rule in KERNEL_RULES:
        assert rule.group in KERNEL_GROUPS
        assert classify_kernel(rule.example) == (rule.group, rule.rule), rule.rule


# Real kernel names (from traces in HolisticTraceAnalysis' tests/data, MIT: amd_trace/mi250 (ROCm 6.2),
# critical_path/alexnet (A100, cuDNN), trace_filter/sampled_rank-0 (A100, a recommendation model), and
# nccl_parser_config (A100)), each with the group a reader of the name would give it.
REAL_KERNELS = {
    "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0": "matmul",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1"
    "_tensor16x8x8_alignc4_execute_kernel__5x_cudnn": "convolution",
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1": "convolution",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>": "convolution",
    "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, int)": "convolution",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float)": "normalisation",
    "void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*, cublasLtEpilogue_t)": "matmul",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_256x6"
    "4_16x4_nn_align4::Params)": "matmul",
    "ampere_sgemm_32x32_sliced1x4_tn": "matmul",
    "volta_sgemm_128x32_nn": "matmul",
    "void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, cublasGemvParams<cublasGemvTensorStridedBatched"
    "<float const>>>": "matmul",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "communication",
    "ncclDevKernel_Generic(ncclDevComm*, unsigned long, ncclWork*)": "communication",
    "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)": "elementwise",
    "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, float const*, "
    "int, int, unsigned char*, bool)": "elementwise",
    "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, long,"
    " double)::{lambda(float)#1}, at::detail::Array<char*, 2> >": "elementwise",
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<c10::Half, float, c10::Half"
    ", 2ul, 32>": "embedding",
    "void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, long, long, "
    "long)": "embedding",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>"
    ", unsigned int, float, 4> >": "reduction",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*)": (
        "normalisation"
    ),
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListM"
    "etadata<2>>": "elementwise",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, "
    "cutlass::half_t>>": "attention",
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80>)": (
        "attention"
    ),
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel": (
        "matmul"
    ),
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT": "matmul",
    "Memcpy HtoD (Pageable -> Device)": "other",  # by name no rule; the trace groups copies by their kind
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)": "other",
}


def test_real_kernel_names_by_vendor():
    from core.measure.kernels import classify_kernel

    wrong = {name: classify_kernel(name) for name, group in REAL_KERNELS.items() if classify_kernel(name)[0] != group}
    assert wrong == {}


# AMD Composable Kernel (CK) and MIOpen convolutions: CK's conv kernels carry a GridwiseGemm in their template
# arguments (the implicit GEMM they run), which the GEMM rules took as matmul; they are convolutions. Names as CK's
# and MIOpen's sources declare them (ck/tensor_operation/gpu/device/impl/device_grouped_conv_*.hpp, MIOpen's
# naive_conv.cpp and its igemm_gtc assembly kernels), demangled as a ROCm trace writes them.
CK_MIOPEN_CONVOLUTIONS = [
    "void ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_xdl_cshuffle_v3<ck::GridwiseGemm"
    "MultiD_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor>, true>",
    "void ck::kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffle<ck::GridwiseGemmMultipleABD_xdl_cshuffle<ck::half_t>, "
    "ck::half_t const*, true, false, false>",
    "void ck::kernel_grouped_conv_fwd_dl_multiple_d<ck::GridwiseGemmDlMultipleD_km_kn_mn<256, float>, true, true>",
    "void ck::kernel_grouped_conv_bwd_data_multiple_d_xdl_cshuffle<ck::GridwiseGemmMultipleD_xdl_cshuffle<ck::half_t>>",
    "void ck::kernel_grouped_conv_bwd_weight_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::bhalf_t>, true>",
    "void ck::kernel_batched_gemm_xdlops_bwd_weight<ck::GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_bwd_weight<256, "
    "ck::half_t>, ck::half_t, true>",
    "naive_conv_ab_nonpacked_fwd_nchw_float_double_float",
    "naive_conv_ab_nonpacked_bwd_nhwc_half_double_half",
    "naive_conv_ab_nonpacked_wrw_nchw_bfloat16_double_bfloat16",
    "igemm_fwd_gtcx_nhwc_fp16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64",
    "igemm_bwd_gtcx_nhwc_fp16_bx0_ex0_bt256x128x32_wt32x32x8_ws2x1_wr2x2_ta1x8x4x1_1x4x1x64_tb1x8x2x1_1x4x1x64",
    "igemm_wrw_gtcx_nhwc_fp32_bx0_ex0_bt64x64x16_wt16x16x4_ws1x1_wr2x2_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16",
    "void ck_tile::kentry<ck_tile::GroupedConvolutionForwardKernel<ck_tile::GemmPipelineAgBgCrCompV3<float>>>",
    "gridwise_convolution_implicit_gemm_v4r4_nchw_kcyx_nkhw",
]
# CK's plain GEMMs stay matmul
CK_GEMMS = [
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor>, true>",
    "void ck::kernel_batched_gemm_xdl<ck::GridwiseGemm_k0mk1_k0nk1_mn_xdlops_v2r3<256, ck::half_t>, true>",
]


# Mixture-of-experts serving libraries no trace in tests/data runs, as their sources declare the kernels, demangled
# as a CUDA trace writes them (flashinfer's include/flashinfer/{norm,activation,pos_enc,sampling}.cuh and its
# prefill/decode kernels, DeepGEMM's deep_gemm/include, TensorRT-LLM's moe_cutlass_kernel.h and moe_kernels.cu,
# vLLM's csrc/moe, cuDNN's generated SDPA kernels): each in the group of its work, none by a library's name alone.
# The real traces naming TensorRT-LLM-gen, Triton MoE, CK and aiter kernels are tests/core/workload/test_moe_kernels.py.
SERVING_KERNELS = {
    "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned "
    "int, unsigned int, unsigned int, float, float)": "normalisation",
    "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
    "unsigned int, unsigned int, unsigned int, float, float)": "normalisation",
    "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &(silu(float const&))>(__nv_bfloat16*, "
    "__nv_bfloat16 const*, int)": "elementwise",
    "void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheHeadParallelismKernel<false, 128u, 8u, 16u, __nv_bfloat16, "
    "long>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, float*, long*, unsigned int)": "elementwise",
    "void flashinfer::BatchPrefillWithRaggedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, 128u, 1u, "
    "4u, 8u, 8u, 1u, 4u, (flashinfer::PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int>>": (
        "attention"
    ),
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, "
    "__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>": "attention",
    "void flashinfer::sampling::TopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, "
    "(cub::BlockReduceAlgorithm)2, 4u, true, float, int>(float*, int*, int*, float*, float, unsigned int, "
    "unsigned int)": "reduction",  # a block scan and reduce over the vocabulary, not attention by "flash"
    "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 160u, 128u, 0u, 64u, 9u, 4u, 128u, 128u, 1u, true, "
    "(deep_gemm::GemmType)1>(__nv_bfloat16*, float*, int*, unsigned int, CUtensorMap_st, CUtensorMap_st, "
    "CUtensorMap_st, CUtensorMap_st)": "matmul",
    "void deep_gemm::fp8_gemm_kernel_swapAB<34816u, 5120u, 128u, 16u>(CUtensorMap_st, CUtensorMap_st)": "matmul",
    "void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)0, 0u, 5120u, 17408u, 1u>(float*, int*, unsigned "
    "int, unsigned int, unsigned int)": "matmul",
    "void cutlass::Kernel<cutlass::gemm::kernel::MoeFCGemm<cutlass::gemm::threadblock::MmaMultistage<cutlass::gemm::"
    "GemmShape<128, 128, 64>>, cutlass::epilogue::threadblock::Epilogue<cutlass::gemm::GemmShape<128, 128, 64>>, "
    "cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle, cutlass::arch::Sm80, "
    "(cutlass::gemm::kernel::GroupScheduleMode)0>>": "matmul",
    "void tensorrt_llm::kernels::finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, "
    "(tensorrt_llm::kernels::ScaleMode)1, true>(__nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16 const*, float "
    "const*, int const*, int const*, long, long, int)": "elementwise",
    "void tensorrt_llm::kernels::expandInputRowsKernel<__nv_bfloat16, true>(__nv_bfloat16 const*, __nv_bfloat16*, "
    "int const*, int*, long, long, int)": "elementwise",
    "void vllm::moe::topkGatingSoftmax<8, 128, 4, 16>(float const*, bool const*, float*, int, int*, int*, int, int, "
    "int)": "elementwise",
    "void vllm::moe::moe_align_block_size_kernel<int>(int*, int*, int*, int*, int, int, int, int, unsigned long, "
    "int*)": "elementwise",
    "void vllm::moe::grouped_topk_fused_small_expert_count<__nv_bfloat16>(__nv_bfloat16*, float*, int*, int)": (
        "elementwise"
    ),
    "fused_moe_kernel": "matmul",  # vLLM/SGLang's Triton MoE GEMM
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x1x1_kernel0_0": "attention",
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0": "attention",
}


def test_serving_library_kernels_by_what_they_do():
    from core.measure.kernels import classify_kernel

    wrong = {
        name: classify_kernel(name) for name, group in SERVING_KERNELS.items() if classify_kernel(name)[0] != group
    }
    assert wrong == {}


@pytest.mark.parametrize("name", CK_MIOPEN_CONVOLUTIONS)
def test_composable_kernel_and_miopen_convolutions_are_not_matmul(name):
    from core.measure.kernels import classify_kernel

    assert classify_kernel(name)[0] == "convolution"


@pytest.mark.parametrize("name", CK_GEMMS)
def test_composable_kernel_gemms_stay_matmul(name):
    from core.measure.kernels import classify_kernel

    assert classify_kernel(name)[0] == "matmul"


def test_step_bench_groups_are_unchanged():
    """Stored step-bench runs have a column per group: the step benchmark keeps its own classifier."""
    assert GROUPS == ("matmul", "attention-softmax", "elementwise", "normalisation", "optimizer", "other")
