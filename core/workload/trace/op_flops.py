"""Operators against the hardware: FLOPs and bytes from recorded shapes, the GPU's datasheet, tensor-core use.

An operator recorded with ``record_shapes=True`` carries its inputs' ``Input Dims`` and ``Input type`` (and,
in newer traces, the scalars as ``Concrete Inputs``). For these the FLOPs (a multiply-add is 2) and the bytes
they must move at least (every input tensor read once, the output written once) follow from the shapes alone:

- ``aten::mm`` ``[M,K]×[K,N]``: 2·M·K·N; ``aten::addmm`` (bias, ``[M,K]``, ``[K,N]``): the same;
  ``aten::bmm`` ``[B,M,K]×[B,K,N]``: 2·B·M·K·N; ``aten::baddbmm`` (bias, then the two): the same;
  ``aten::linear`` (``[…,K]``, weight ``[N,K]``): 2·(the input's other dims)·K·N; ``aten::matmul`` of two
  matrices or two equal batches as mm and bmm; the output is M·N (times B);
- attention (``aten::_scaled_dot_product_{flash,efficient,cudnn}_attention``, ``scaled_dot_product_attention``,
  ``_flash_attention_forward``/``_efficient_attention_forward`` and their backwards), q ``[B,H,L,E]``, k
  ``[B,H,S,E]``, v ``[B,H,S,Ev]`` (``[B,L,H,E]`` for the ``_flash``/``_efficient`` ones): 2·B·H·L·S·(E + Ev) (the
  scores and the weighted sum), halved where ``Concrete Inputs`` say is_causal; the output is B·H·L·Ev; a
  backward 2.5 times the forward (dq, dk, dv written);
- convolution (``aten::convolution``/``_convolution``/``cudnn_convolution``/``conv1d/2d/3d``), input
  ``[N,C,…]``, weight ``[K,C/g,…]``, with stride, padding and dilation from ``Concrete Inputs`` (else the
  shapes do not allow it): 2·N·K·(C/g)·∏kernel·∏output, the output N·K·∏output; ``convolution_backward``
  (grad_output, input, weight, then the forward's arguments and ``output_mask``): that once for the input's
  gradient and once for the weight's, as the mask asks, reading the three and writing the gradients.

An operator's **achieved** TFLOPS and TB/s are its FLOPs and bytes over the GPU time of the activities it
launched (:mod:`core.workload.trace.ops`), summed over its calls with shapes; they are set against the peak of the
trace's own GPU — its ``deviceProperties`` name (and memory) matched to the lab's datasheet table
(:mod:`core.hardware.specs`), in the unit of its dtype (fp32 as TF32 where all its kernels' names say tf32 or ``tensorop_s1688``) — or
"no reference for <name>".

**Tensor cores** (:func:`tensor_core_use`): GPU time in fp32 kernels that use no tensor core — cuBLAS' SIMT
GEMMs (``volta_sgemm``, ``ampere_sgemm``, ``sgemm_…``, CUTLASS ``simt_sgemm``), cuDNN's ``scudnn`` convolutions
— and in kernels built for an older architecture than the GPU's (the ``sm80_``/``cutlass_80_``/``ampere_``
of a name on an sm 9.0 device), each with the time at stake.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from core.arrays import distinct
from core.hardware.specs import match_spec
from core.units import shapes_text, us_text
from core.workload.findings import Finding
from core.workload.trace.cpu_ops import CpuOps
from core.workload.trace.file import COMM, TraceFile

BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
}
UNIT = {"double": "fp64_tc", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16"}
UNIT.update({k: "fp8" for k in BYTES if "Float8" in k})
_GEMM = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear)$")
_ATTENTION = re.compile(
    r"^aten::(_scaled_dot_product_(flash|efficient|cudnn)_attention|scaled_dot_product_attention|"
    r"_flash_attention_forward|_flash_attention_backward|_efficient_attention_forward|_efficient_attention_backward)"
)
# where an attention operator's is_causal is among its arguments (Concrete Inputs), by operator
_CAUSAL_AT = {
    "scaled_dot_product_attention": 5,
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6,
    "_flash_attention_forward": 8,
}
_CONV = re.compile(
    r"^aten::(convolution|_convolution|cudnn_convolution|miopen_convolution|conv[123]d|convolution_backward)$"
)
SIMT = re.compile(r"(volta|turing|ampere|ada|hopper|maxwell|pascal)_sgemm|(^|\W)sgemm_|simt_sgemm|scudnn", re.I)
_ARCH = re.compile(
    r"(?:^|\W|_)sm_?(\d{2,3})_|cutlass_(\d{2,3})_|(?:^|_)(maxwell|pascal|volta|turing|ampere|hopper)_", re.I
)
_ARCH_OF = {"maxwell": 50, "pascal": 60, "volta": 70, "turing": 75, "ampere": 80, "hopper": 90}
# CUTLASS/cuBLAS GEMMs for operands aligned to 1 or 2 elements: what cuBLAS picks where a dimension is not a multiple
# of 8 (an odd sequence length), whatever the GPU; kernels built for an older architecture than the GPU's among them
UNALIGNED = re.compile(r"_align[12](?![0-9])", re.I)
# fp32 inputs on tensor cores: a name that says tf32, or CUTLASS/cuBLAS' sm80+ fp32 tensor-op GEMM (s1688: TF32's mma)
_TF32 = re.compile(r"tf32|tensorop_s1688", re.I)
MIN_KERNEL_SHARE = 0.05  # a tensor-core finding holds at least this share of the kernel time


def _load(text: str):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _dims(value) -> list[list[int]] | None:
    if not isinstance(value, list):
        return None
    out = []
    for d in value:
        if not isinstance(d, list) or not all(type(x) is int and x >= 0 for x in d):
            out.append([])  # a scalar or a list of tensors: no shape
        else:
            out.append(d)
    return out


def _ints(text) -> list[int] | None:
    """A ``Concrete Inputs`` entry such as ``"[1, 1]"`` as integers."""
    value = _load(text) if isinstance(text, str) else text
    if isinstance(value, int):
        return [value]
    if isinstance(value, list) and all(type(x) is int for x in value):
        return value
    return None


def _bools(text) -> list[bool] | None:
    """A ``Concrete Inputs`` entry such as ``"[True, True, False]"`` (Python's spelling, not JSON's)."""
    if not isinstance(text, str) or not (text.startswith("[") and text.endswith("]")):
        return None
    words = [w.strip() for w in text[1:-1].split(",")]
    return [w == "True" for w in words] if all(w in ("True", "False") for w in words) else None


def _prod(xs) -> int:
    return math.prod(xs) if xs else 1


def count(name: str, shape: tuple[str, str, str]) -> tuple[float, float, str] | None:
    """The FLOPs, the bytes and the dtype of one operator call from its recorded shapes; None where they do not
    give them."""
    dims, types = _dims(_load(shape[0])), _load(shape[1])
    if not dims or not isinstance(types, list):
        return None
    tensors = [(d, t) for d, t in zip(dims, types) if d and t in BYTES]
    if not tensors:
        return None
    dtype = tensors[0][1]
    size = BYTES[dtype]
    read = sum(_prod(d) * BYTES[t] for d, t in tensors)
    op = name.removeprefix("aten::")
    if _GEMM.match(name):
        pair = [d for d, _ in tensors if len(d) >= 2]
        if op in ("addmm", "baddbmm") and len(tensors) >= 3:
            pair = [d for d, _ in tensors[1:3]]
        if op == "linear":
            x, w = tensors[0][0], tensors[1][0] if len(tensors) > 1 else []
            if len(w) != 2 or not x or x[-1] != w[1]:
                return None
            rows = _prod(x[:-1])
            return 2.0 * rows * w[1] * w[0], read + rows * w[0] * size, dtype
        if len(pair) < 2:
            return None
        a, b = pair[0], pair[1]
        if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
            m, k, n, batch = a[0], a[1], b[1], 1
        elif len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
            batch, m, k, n = a[0], a[1], a[2], b[2]
        else:
            return None
        return 2.0 * batch * m * k * n, read + batch * m * n * size, dtype
    if _ATTENTION.match(name):
        return _attention(op, tensors, _load(shape[2]), size, read, dtype)
    if _CONV.match(name):
        return _conv(op, tensors, _load(shape[2]), size, read, dtype)
    return None


def _attention(op: str, tensors: list, concrete, size: int, read: int, dtype: str) -> tuple[float, float, str] | None:
    """Attention's FLOPs: 2·B·H·L·S·(E + Ev), halved under a causal mask where ``Concrete Inputs`` say is_causal;
    a backward (its inputs start with the output's gradient) 2.5 times that. ``_flash/_efficient_attention_*``
    take ``[B, L, H, E]``, the ``scaled_dot_product`` ones ``[B, H, L, E]``."""
    backward = op.endswith("_backward")
    qkv = tensors[1:4] if backward else tensors[:3]
    if len(qkv) < 3 or any(len(d) != 4 for d, _ in qkv):
        return None
    (q, _), (k, _), (v, _) = qkv
    if op.startswith(("_flash_attention", "_efficient_attention")):  # [B, L, H, E] → [B, H, L, E]
        q, k, v = ([d[0], d[2], d[1], d[3]] for d in (q, k, v))
    b, h, seq_q, e = q
    seq_k, e_v = k[2], v[3]
    flops = 2.0 * b * h * seq_q * seq_k * (e + e_v)
    at = _CAUSAL_AT.get(op)
    if at is not None and isinstance(concrete, list) and at < len(concrete) and concrete[at] in ("True", True):
        flops /= 2
    if backward:
        return 2.5 * flops, read + 3 * _prod(q) * size, dtype  # dq, dk, dv written
    return flops, read + b * h * seq_q * e_v * size, dtype


def _conv(op: str, tensors: list, concrete, size: int, read: int, dtype: str) -> tuple[float, float, str] | None:
    """A convolution's FLOPs and bytes: its stride, padding and dilation from ``Concrete Inputs`` (positions 3, 4
    and 5 after input, weight and bias; ``cudnn_convolution`` has no bias and puts padding first)."""
    backward = op == "convolution_backward"
    if backward:  # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, …, output_mask)
        tensors, concrete = tensors[1:], concrete[1:] if isinstance(concrete, list) else concrete
    if len(tensors) < 2 or not isinstance(concrete, list):
        return None
    x, w = tensors[0][0], tensors[1][0]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x):
        return None
    at = (3, 2, 4) if op == "cudnn_convolution" else (3, 4, 5)  # stride, padding, dilation
    transposed = len(concrete) > 6 and concrete[6] in ("True", True)
    if transposed and op in ("convolution", "_convolution", "convolution_backward"):
        return None
    found = [_ints(concrete[i]) if i < len(concrete) else None for i in at]
    if any(v is None or len(v) not in (1, spatial) for v in found):
        return None
    s, p, d = [(v * spatial if len(v) == 1 else v) for v in found if v is not None]
    out = [(x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1 if s[i] else 0 for i in range(spatial)]
    if any(o <= 0 for o in out):
        return None
    n, k = x[0], w[0]  # the weight's second dimension is C / groups
    flops = 2.0 * n * k * w[1] * _prod(w[2:]) * _prod(out)
    if backward:  # the input's and the weight's gradient, where output_mask asks for them: each as the forward
        wanted = _bools(concrete[-1]) if concrete else None
        if wanted is None or len(wanted) < 2:
            return None
        written = wanted[0] * _prod(x) + wanted[1] * _prod(w)
        return flops * (wanted[0] + wanted[1]), read + written * size, dtype
    return flops, read + n * k * _prod(out) * size, dtype


# GPUs a file lists without a name (vLLM's ROCm traces write "") told apart by what their deviceProperties give:
# (computeMajor, computeMinor), compute units, the most memory: the name they stand for. The MI300X: gfx942 with
# 304 CUs (AMD's MI300 microarchitecture page) and 192 GiB (the MI325X shares the rest with 256 GB).
_BY_PROPERTIES = {((9, 4), 304, 200 * 2**30): "AMD Instinct MI300X"}


def reference(trace: TraceFile, device: int):
    """The datasheet entry of the trace's GPU (None) and what to say of it; a GPU the file does not name by the
    properties it lists, where they tell one part (:data:`_BY_PROPERTIES`), said so."""
    name = trace.gpu_names.get(device)
    memory = trace.gpu_memory.get(device)
    if name is None:
        arch, units = trace.gpu_arch.get(device), trace.gpu_units.get(device)
        found = [n for (a, u, most), n in _BY_PROPERTIES.items() if (a, u) == (arch, units) and (memory or 0) <= most]
        spec = match_spec(found[0], memory) if found and memory and arch else None
        if spec is None or arch is None or memory is None:
            return None, f"no reference for GPU {device} (the trace names no GPU)"
        return spec, (
            f"{spec.name} (the trace names no GPU; its compute {arch[0]}.{arch[1]}, {units} compute units and "
            f"{memory / 2**30:,.0f} GiB are one's)"
        )
    spec = match_spec(name, memory)
    return spec, (spec.name if spec else f"no reference for {name}")


def rates(trace: TraceFile, op_of: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, list, np.ndarray]:
    """For the activities ``idx`` (their operators ``op_of``): each operator call's FLOPs and bytes (NaN where
    its shapes give none), its dtype (None) and whether its kernels' names say tf32, by host event."""
    ops: CpuOps = trace.ops
    a = trace.activities
    events = distinct(op_of[op_of >= 0])
    flops = np.full(len(ops.name), np.nan)
    moved = np.full(len(ops.name), np.nan)
    dtype: list = [None] * len(ops.name)
    tf32 = np.zeros(len(ops.name), bool)
    tf32_name = np.array([bool(_TF32.search(n)) for n in a.names] or [False])
    said = op_of[(op_of >= 0) & tf32_name[a.name[idx]]]
    tf32[said] = True
    cache: dict[tuple[int, int], tuple[float, float, str] | None] = {}
    for e in events[ops.shape[events] >= 0].tolist():
        key = (int(ops.name[e]), int(ops.shape[e]))
        if key not in cache:
            cache[key] = count(ops.names[key[0]], ops.shapes[key[1]])
        got = cache[key]
        if got is not None:
            flops[e], moved[e], dtype[e] = got
    return flops, moved, dtype, tf32


def _unit(dtype: str | None, tf32: bool) -> str:
    """The datasheet column a call ran on: its dtype's, fp32 as TF32 where its kernels say so ("" unknown)."""
    unit = UNIT.get(dtype or "", "")
    return "tf32" if unit == "fp32" and tf32 else unit


def add_rates(trace: TraceFile, device: int, rows: list[dict], keys: list, op_of, idx, dur) -> str:
    """Each of ``rows`` (an operator and module, its calls' host events in ``keys``) gets ``tflops`` and ``tbps``
    over the GPU time of its calls with shapes, the dtype's ``unit``, and, against the trace's GPU, ``peak_tflops``,
    ``peak_tbps`` and ``peak_share`` (of the FLOPS peak); returns the reference's name or why there is none."""
    flops, moved, dtype, tf32 = rates(trace, op_of, idx)
    spec, said = reference(trace, device)
    gpu = np.bincount(op_of[op_of >= 0], weights=dur[op_of >= 0], minlength=len(flops))
    for row, events in zip(rows, keys):
        events = [e for e in events if not math.isnan(flops[e])]
        if not events:
            continue
        us = float(gpu[events].sum())
        if us <= 0:
            continue
        # each call against the unit it ran on: an fp32 call whose kernels say TF32 ran on TF32 tensor cores
        units = [_unit(dtype[e], bool(tf32[e])) for e in events]
        row["tflops"] = float(flops[events].sum()) / us / 1e6
        row["tbps"] = float(moved[events].sum()) / us / 1e6
        row["flops"] = float(flops[events].sum())
        row["bytes"] = float(moved[events].sum())
        row["rated_us"] = us
        row["unit"] = units[0] if len(set(units)) == 1 and units[0] else "mixed"
        if spec is not None:
            peaks = [spec.peak(u) if u else None for u in units]
            row["peak_tbps"] = spec.bandwidth_gbs / 1000
            row["bandwidth_share"] = row["tbps"] / row["peak_tbps"]
            row["peak_tflops"] = row["peak_share"] = None
            if len(set(peaks)) == 1 and peaks[0]:
                row["peak_tflops"] = peaks[0]
            elif all(peaks):  # the units the calls ran on, weighted by their GPU time: what the hardware could do then
                row["peak_tflops"] = float(sum(gpu[e] * p for e, p in zip(events, peaks) if p)) / us
            if row["peak_tflops"]:
                row["peak_share"] = row["tflops"] / row["peak_tflops"]
    return said


def _arch(name: str) -> int | None:
    m = _ARCH.search(name)
    if not m:
        return None
    if m.group(1) or m.group(2):
        return int(m.group(1) or m.group(2))
    return _ARCH_OF[m.group(3).lower()]


def tensor_core_use(trace: TraceFile, device: int) -> dict:
    """The GPU time in fp32 SIMT GEMM/convolution kernels and in kernels built for an older architecture than the
    GPU's, with the kernels holding most: ``{"kernel_time_us", "simt_us", "simt_kernels", "simt_top",
    "device_arch", "older_us", "older_top"}``."""
    a = trace.activities
    sel = np.flatnonzero((a.device == device) & (a.kind <= COMM))
    dur = (a.end - a.start)[sel]
    per_name = np.bincount(a.name[sel], weights=dur, minlength=len(a.names))
    calls = np.bincount(a.name[sel], minlength=len(a.names))
    simt = [i for i, n in enumerate(a.names) if per_name[i] > 0 and SIMT.search(n)]
    major_minor = trace.gpu_arch.get(device)
    arch = major_minor[0] * 10 + major_minor[1] if major_minor else None
    unaligned = [i for i, n in enumerate(a.names) if per_name[i] > 0 and UNALIGNED.search(n)]
    older = [
        i
        for i, n in enumerate(a.names)
        if per_name[i] > 0 and arch and (k := _arch(n)) and k // 10 < arch // 10 and i not in unaligned
    ]

    def top(names: list[int]) -> list[dict]:
        ranked = sorted(names, key=lambda i: -per_name[i])[:5]
        return [{"kernel": a.names[i], "time_us": float(per_name[i]), "count": int(calls[i])} for i in ranked]

    return {
        "kernel_time_us": float(dur.sum()),
        "simt_us": float(per_name[simt].sum()) if simt else 0.0,
        "simt_kernels": int(calls[simt].sum()) if simt else 0,
        "simt_top": top(simt),
        "device_arch": arch,
        "older_us": float(per_name[older].sum()) if older else 0.0,
        "older_top": top(older),
        "unaligned_us": float(per_name[unaligned].sum()) if unaligned else 0.0,
        "unaligned_top": top(unaligned),
    }


TENSOR_CORES_FROM = 70  # sm 7.0 (Volta): fp16 tensor cores
BF16_TF32_FROM = 80  # sm 8.0 (Ampere): bf16 and TF32 on tensor cores too; Volta and Turing have neither


def _tensor_core_advice(arch: int | None) -> str:
    """What puts fp32 GEMMs on this GPU's tensor cores, by what its architecture has: a V100 (sm 7.0) or a T4
    (sm 7.5) takes fp16 only, so bf16 and TF32 are never offered to it."""
    if arch is not None and arch < TENSOR_CORES_FROM:
        return f"this GPU (sm {arch // 10}.{arch % 10}) has no tensor cores"
    if arch is not None and arch < BF16_TF32_FROM:
        return (
            f"on this GPU (sm {arch // 10}.{arch % 10}) tensor cores take fp16 only, no bf16 or TF32: autocast to "
            "float16 (with a GradScaler)"
        )
    return "allow TF32 (torch.set_float32_matmul_precision('high')) or autocast to bf16"


def tensor_core_findings(meta: dict) -> list[Finding]:
    """GPU time without tensor cores, or in kernels for an older architecture, as findings with the time at stake
    (each ≥ 5 % of the kernel time)."""
    t = meta.get("tensor_cores") or {}
    total = t.get("kernel_time_us") or 0.0
    out = []
    if total and t["simt_us"] / total >= MIN_KERNEL_SHARE:
        how = _tensor_core_advice(t.get("device_arch"))
        top = t["simt_top"][0]
        out.append(
            Finding(
                "tensor_cores",
                f"{us_text(t['simt_us'])} ({t['simt_us'] / total:.1%} of kernel time) in fp32 GEMM/convolution "
                f"kernels that use no tensor core ({t['simt_kernels']:,} launches, most {top['kernel']})",
                100 * t["simt_us"] / total,
                "%",
                advice=f": {how}",
                time_us=t["simt_us"],
            )
        )
    if total and t.get("unaligned_us", 0.0) / total >= MIN_KERNEL_SHARE:
        top = t["unaligned_top"][0]
        where = meta.get("unaligned_op") or {}
        dims = _dims(_load(where.get("dims") or ""))  # the operator's Input Dims as the trace wrote them
        shape = (
            f", most under {where['op']}{' ' + shapes_text(dims) if dims else ''} "
            f"({', '.join(f'{d:,}' for d in where['odd'])})"
            if where.get("odd")
            else ""
        )
        out.append(
            Finding(
                "unaligned",
                f"{us_text(t['unaligned_us'])} ({t['unaligned_us'] / total:.1%} of kernel time) in GEMM kernels "
                f"for unaligned operands (most {top['kernel']})",
                100 * t["unaligned_us"] / total,
                "%",
                why=f": cuBLAS picks them where a dimension is not a multiple of 8{shape}",
                advice=" — pad it (the sequence length, a hidden size) to a multiple of 8",
                time_us=t["unaligned_us"],
            )
        )
    if total and t["older_us"] / total >= MIN_KERNEL_SHARE:
        top = t["older_top"][0]
        out.append(
            Finding(
                "older_architecture",
                f"{us_text(t['older_us'])} ({t['older_us'] / total:.1%} of kernel time) in kernels built for an "
                f"older architecture than this GPU's sm {t['device_arch'] // 10}.{t['device_arch'] % 10} (most "
                f"{top['kernel']})",
                100 * t["older_us"] / total,
                "%",
                why=": a library or build without kernels for this GPU",
                time_us=t["older_us"],
            )
        )
    return out
