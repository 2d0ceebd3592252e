"""The groups kernel time is reported in: kernel and op names of cuBLAS, cuDNN, Triton and ATen."""

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
