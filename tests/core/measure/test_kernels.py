"""Which group an op or kernel name falls in (the GPU kernel names are tested with the step benchmark)."""

from core.measure.kernels import GROUPS, HOST_GAP_NAME, classify


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
