"""Which kind of work a kernel (GPU) or an op (CPU) is, by its name: the groups the step benchmark and an
imported profiler trace both report, so the two can be read side by side.

Names are matched as lower-case substrings, first group wins; a name matching nothing is "other".
"""

from __future__ import annotations

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
