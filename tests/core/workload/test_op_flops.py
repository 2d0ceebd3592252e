"""Operators against the hardware on real traces (tests/data/workload/README.md): each operator's achieved TFLOPS
and TB/s from its recorded shapes, against FLOPs written out here from the file's own JSON events (hand formulas,
the GPU time of the kernels each operator launched by a plain loop), the peak of the trace's own GPU, and the
kernels that use no tensor core or were built for an older architecture."""

import gzip
import json

import pytest

pytest.importorskip("msgspec")

from core.workload.trace.file import read_trace
from core.workload.trace.op_flops import count, reference, tensor_core_findings, tensor_core_use
from core.workload.trace.ops import op_breakdown
from core.workload.trace.timeline import analyse_trace
from tests.core.workload.traces import (
    ALEXNET,
    BERT,
    CONV_BACKWARD,
    DATA,
    GPU,
    QWEN_H100,
    RECSYS,
    STEP,
    VIT,
    VLLM_MOE,
    trace_events,
)

H100_SXM_BF16 = 989.4  # TFLOPS, dense: NVIDIA H100 datasheet (the lab's table, core/hardware/specs.py)
H100_SXM_TBPS = 3.35  # TB/s
SIZE = {"c10::BFloat16": 2, "float": 4}


def hand_flops(op):
    """FLOPs and bytes of one operator event, written out per operator from its Input Dims."""
    name = op["name"]
    if name not in ("aten::addmm", "aten::_flash_attention_forward", "aten::cudnn_convolution"):
        return None
    d, t, c = op["args"]["Input Dims"], op["args"]["Input type"], op["args"].get("Concrete Inputs")
    s = SIZE[t[0]]
    if name == "aten::addmm":  # bias, [M,K], [K,N]
        (m, k), (_, n) = d[1], d[2]
        bias = 1
        for x in d[0]:
            bias *= x
        return 2 * m * k * n, (bias + m * k + k * n + m * n) * s
    if name == "aten::_flash_attention_forward":  # [B, L, H, E] each
        (b, seq, h, e), (_, seq_k, _, _), (_, _, _, ev) = d[0], d[1], d[2]
        flops = 2 * b * h * seq * seq_k * (e + ev)
        return (flops / 2 if c[8] == "True" else flops), (3 * b * seq * h * e + b * h * seq * ev) * s
    if name == "aten::cudnn_convolution":  # padding, stride, dilation as Concrete Inputs 2, 3, 4
        (n, ch, hh, ww), (k, cg, r, q) = d[0], d[1]
        pad, stride, dil = json.loads(c[2]), json.loads(c[3]), json.loads(c[4])
        oh = (hh + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
        ow = (ww + 2 * pad[1] - dil[1] * (q - 1) - 1) // stride[1] + 1
        return 2 * n * k * cg * r * q * oh * ow, (n * ch * hh * ww + k * cg * r * q + n * k * oh * ow) * s
    raise AssertionError(name)


def expected_rates(path, device):
    """{(op, module): (TFLOPS, TB/s)} for the operators hand_flops knows: each GPU activity's launch call by
    correlation id, the innermost cpu_op on its thread holding the call, its module the innermost
    `nn.Module: …` Python event around it; the rate is the FLOPs over the GPU µs of those operators' activities."""
    events = trace_events(path)
    order = {id(e): i for i, e in enumerate(events)}
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]
    }
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    modules = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]

    def innermost(candidates, tid, t0, t1):
        holding = [e for e in candidates if e["tid"] == tid and e["ts"] <= t0 and t1 <= e["ts"] + e["dur"]]
        return max(holding, key=lambda e: (e["ts"], -e["dur"], order[id(e)]), default=None)

    per_op = {}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or e["args"].get("device") != device:
            continue
        call = runtime.get(e["args"].get("correlation"))
        op = call and innermost(ops, call["tid"], call["ts"], call["ts"])
        if op is not None:
            per_op.setdefault(id(op), [op, 0.0])[1] += e["dur"]
    rows = {}
    for op, us in per_op.values():
        got = hand_flops(op)
        if got is None:
            continue
        module = innermost(modules, op["tid"], op["ts"], op["ts"] + op["dur"])
        row = rows.setdefault((op["name"], module["name"] if module else None), [0.0, 0.0, 0.0])
        row[0] += got[0]
        row[1] += got[1]
        row[2] += us
    return {key: (f / us / 1e6, b / us / 1e6) for key, (f, b, us) in rows.items()}


@pytest.mark.parametrize("path", [BERT, VIT], ids=lambda p: p.name)
def test_achieved_rates_against_the_files_own_shapes(path):
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"], top=10_000)
    want = expected_rates(path, meta["device"])
    rated = {(r["op"], r["module"]): (r["tflops"], r["tbps"]) for r in got["ops"] if "tflops" in r}
    assert rated.keys() == want.keys() and len(rated) >= 20
    for key, (tflops, tbps) in want.items():
        assert rated[key] == pytest.approx((tflops, tbps), rel=1e-9), key
    # against the trace's own GPU: "NVIDIA H100 80GB HBM3" is the H100 SXM's datasheet entry, bf16 dense
    assert got["ops_reference"] == "NVIDIA H100 SXM"
    for r in got["ops"]:
        if "tflops" in r:
            assert r["unit"] == "bf16" and r["peak_tflops"] == H100_SXM_BF16 and r["peak_tbps"] == H100_SXM_TBPS
            assert r["peak_share"] == pytest.approx(r["tflops"] / H100_SXM_BF16)


def test_causal_attention_on_a_real_chat_model_trace_by_hand():
    """Qwen1.5-0.5B-Chat on an H100 (TraceLens): each of its 24 layers' flash attention is causal (Concrete Inputs
    say is_causal True), so half the scores are masked: 2·B·H·L·S·(E + Ev) / 2 = 2·16·16·559·559·128 / 2 =
    10,239,377,408 FLOPs a call, over the GPU µs of the kernels each call launched (a plain loop)."""
    trace = read_trace(QWEN_H100)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"], top=10_000)
    flash = {r["module"]: r for r in got["ops"] if r["op"] == "aten::_flash_attention_forward"}
    want = {m: rates for (op, m), rates in expected_rates(QWEN_H100, meta["device"]).items() if "flash" in op}
    assert len(flash) == len(want) == 24 and all(r["calls"] == 1 for r in flash.values())
    for module, r in flash.items():
        assert r["tflops"] == pytest.approx(10_239_377_408 / r["gpu_time_us"] / 1e6, rel=1e-12)
        assert (r["tflops"], r["tbps"]) == pytest.approx(want[module], rel=1e-9)
    # layer 0: 115.711 µs → 88.5 TFLOPS, 8.9 % of the H100's dense bf16 peak (counted unmasked: twice that)
    assert flash["nn.Module: Qwen2Attention_0"]["tflops"] == pytest.approx(88.49, abs=0.01)


def test_the_vit_patch_embedding_by_hand():
    # nn.Module: Conv2d_0 of the ViT: input [4, 3, 224, 224] bf16, weight [768, 3, 16, 16], stride 16, no padding:
    # a 14 × 14 output, 2·4·768·3·16·16·196 = 924,844,032 FLOPs
    shape = (
        "[[4, 3, 224, 224], [768, 3, 16, 16], [], [], [], [], [], [], []]",
        '["c10::BFloat16", "c10::BFloat16", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", '
        '"Scalar"]',
        '["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"]',
    )
    flops, moved, dtype = count("aten::cudnn_convolution", shape)
    assert flops == 924_844_032 and dtype == "c10::BFloat16"
    assert moved == (4 * 3 * 224 * 224 + 768 * 3 * 16 * 16 + 4 * 768 * 14 * 14) * 2
    trace = read_trace(VIT)
    _, meta = analyse_trace(trace)
    (conv,) = [
        r for r in op_breakdown(trace, meta["device"], top=10_000)["ops"] if r["op"] == "aten::cudnn_convolution"
    ]
    assert conv["flops"] == 924_844_032 and conv["tflops"] == pytest.approx(924_844_032 / conv["rated_us"] / 1e6)


def test_a_resnet_s_convolution_backward_by_hand():
    """Three ``aten::convolution_backward`` calls of a ResNet trained in bf16 on an MI300X (output_mask
    [True, True, False]: the input's and the weight's gradients, each a forward's FLOPs): two 3×3 convolutions,
    512 → 512 channels on 7×7, 2·10·512·512·9·49 × 2 = 4,624,220,160 FLOPs each, and a 1×1 of stride 2, 256 → 512
    from 14×14, 2·10·512·256·49 × 2 = 256,901,120; read grad_output, input and weight, write both gradients. The
    GPU time: every kernel, copy and set of the file (it keeps only these calls' launches), from its events."""
    big = 2 * 10 * 512 * 512 * 9 * 49 * 2
    small = 2 * 10 * 512 * 256 * 49 * 2
    moved_big = (10 * 512 * 49 * 2 + 512 * 512 * 9) * 2 + (10 * 512 * 49 + 512 * 512 * 9) * 2
    moved_small = (10 * 512 * 49 + 10 * 256 * 196 + 512 * 256) * 2 + (10 * 256 * 196 + 512 * 256) * 2
    kernels_us = sum(e["dur"] for e in trace_events(CONV_BACKWARD) if e.get("cat") in GPU)
    trace = read_trace(CONV_BACKWARD)
    _, meta = analyse_trace(trace)
    (conv,) = op_breakdown(trace, meta["device"], top=100)["ops"]
    assert (conv["op"], conv["calls"], conv["unit"]) == ("aten::convolution_backward", 3, "bf16")
    assert conv["flops"] == 2 * big + small == 9_505_341_440 and conv["bytes"] == 2 * moved_big + moved_small
    assert conv["rated_us"] == pytest.approx(kernels_us) and conv["tflops"] == pytest.approx(
        9_505_341_440 / kernels_us / 1e6
    )


@pytest.mark.parametrize(
    ("path", "said"),
    [(RECSYS, "no reference for GPU 0 (the trace names no GPU)"), (STEP, "no reference for Tesla V100-SXM2-16GB")],
    ids=["recsys", "v100"],
)
def test_no_reference_is_said(path, said):
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"], top=10_000)
    assert got["ops_reference"] == said
    rated = [r for r in got["ops"] if "tflops" in r]
    assert rated and all("peak_tflops" not in r for r in rated)


A100_CONTROL = DATA / "hta_a100_control_step1012.json.gz"


def test_fp32_matmuls_on_tf32_tensor_cores_are_held_against_tf32():
    """HTA's A100 recommendation step: its fp32 ``aten::mm``/``addmm`` calls run partly on CUTLASS' TF32 tensor-op
    GEMMs (``tensorop_s1688``) and partly on SIMT ``sgemm`` kernels (both in the file, counted here). Against the
    fp32 peak (19.5 TFLOPS) two rows read 158 % and 172 % of it; each call against the unit it ran on, the rows lie
    between the fp32 and the TF32 peak (156) and none above 100 %: the top two about 22 %."""
    names = {e["name"] for e in trace_events(A100_CONTROL) if e.get("cat") == "kernel"}
    assert any("tensorop_s1688" in n for n in names) and any("sgemm" in n and "tensorop" not in n for n in names)
    trace = read_trace(A100_CONTROL)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"], top=100)
    assert got["ops_reference"] == "NVIDIA A100 SXM 40GB"
    rated = [r for r in got["ops"] if r.get("peak_share") is not None]
    assert len(rated) >= 6 and all(0 < r["peak_share"] <= 1 for r in rated)
    assert all(19.5 <= r["peak_tflops"] <= 156 for r in rated)
    assert all(r["peak_tflops"] == 156 for r in rated if r["unit"] == "tf32")
    top = sorted(rated, key=lambda r: -r["tflops"])[:2]
    assert all(r["unit"] == "mixed" and 0.20 < r["peak_share"] < 0.24 for r in top)
    assert all(r["tflops"] > 19.5 for r in top)  # above the fp32 peak: they could only have run on tensor cores


def test_a_gpu_the_file_does_not_name_is_known_by_its_properties():
    """vLLM's MI300X trace names its GPUs "" but lists compute 9.4, 304 compute units and 192 GiB: an MI300X's,
    and no other part's (the MI325X has 256 GB); the roofline is against the MI300X, said so."""
    with gzip.open(VLLM_MOE) as f:
        (props,) = [p for p in json.load(f)["deviceProperties"] if p["id"] == 2]
    assert (props["name"], props["computeMajor"], props["computeMinor"], props["numSms"]) == ("", 9, 4, 304)
    assert props["totalGlobalMem"] == 206_141_652_992  # 192.0 GiB
    trace = read_trace(VLLM_MOE)
    _, meta = analyse_trace(trace)
    spec, said = reference(trace, meta["device"])
    assert spec is not None and spec.key == "mi300x"
    assert (
        said == "AMD Instinct MI300X (the trace names no GPU; its compute 9.4, 304 compute units and 192 GiB are one's)"
    )
    rated = [r for r in op_breakdown(trace, meta["device"], top=100)["ops"] if r.get("peak_share") is not None]
    assert rated and all(r["peak_tflops"] == 1307.4 for r in rated if r["unit"] == "bf16")


def kernel_time(path, device, *words):
    return sum(
        e["dur"]
        for e in trace_events(path)
        if e.get("cat") == "kernel" and e["args"].get("device") == device and any(w in e["name"] for w in words)
    )


def test_fp32_kernels_without_tensor_cores():
    for path, device, words, arch in (
        (ALEXNET, 0, ("ampere_sgemm", "scudnn"), "TF32"),
        (STEP, 1, ("volta_sgemm",), "fp16 only"),  # the V100 step's busiest GPU is 1 of the file's 8
    ):
        trace = read_trace(path)
        _, meta = analyse_trace(trace)
        meta["tensor_cores"] = t = tensor_core_use(trace, meta["device"])
        assert meta["device"] == device
        assert t["simt_us"] == pytest.approx(kernel_time(path, device, *words)) and t["simt_us"] > 0
        assert t["older_us"] == 0  # sm80 kernels on an sm 8.0 A100, volta ones on an sm 7.0 V100
        (found,) = tensor_core_findings(meta)
        assert found.value == pytest.approx(100 * t["simt_us"] / t["kernel_time_us"]) and arch in found.text
    # alexnet by hand: ampere_sgemm_32x32_sliced1x4_tn 2,621 µs + cudnn_ampere_scudnn_128x64_relu_… 2,069 µs
    assert tensor_core_use(read_trace(ALEXNET), 0)["simt_us"] == 2621 + 2069


@pytest.mark.parametrize("arch", [70, 75])
def test_a_gpu_without_bf16_is_never_told_to_use_it(arch):
    """Volta (sm 7.0, V100) and Turing (sm 7.5, T4) tensor cores take fp16, not bf16 or TF32 (NVIDIA's Ampere
    whitepaper: bf16 and TF32 tensor cores are new in sm 8.0): the advice names float16 alone."""
    meta = {"tensor_cores": {"kernel_time_us": 100.0, "simt_us": 50.0, "simt_kernels": 3, "device_arch": arch,
                             "simt_top": [{"kernel": "volta_sgemm_128x64_nn", "time_us": 50.0, "count": 3}],
                             "older_us": 0.0, "older_top": []}}  # fmt: skip
    (found,) = tensor_core_findings(meta)
    assert "float16" in found.text and "fp16 only" in found.text
    assert "autocast to bf16" not in found.text and "fp16/bf16" not in found.text
    assert "set_float32_matmul_precision" not in found.text


def test_kernels_built_for_an_older_architecture():
    # an sm 9.0 H100 running CUTLASS's sm80 kernels (cutlass_80_…): the time at stake from the file's kernels
    for path in (BERT, VIT):
        trace = read_trace(path)
        _, meta = analyse_trace(trace)
        meta["tensor_cores"] = t = tensor_core_use(trace, meta["device"])
        assert t["device_arch"] == 90 and t["simt_us"] == 0
        # those for unaligned operands (align1, align2) are said apart: cuBLAS picks them for an odd dimension
        unaligned = kernel_time(path, meta["device"], "_align1", "_align2")
        assert t["unaligned_us"] == pytest.approx(unaligned)
        older = kernel_time(path, meta["device"], "cutlass_80_", "sm80_", "ampere_") - unaligned
        assert t["older_us"] == pytest.approx(older)
        assert t["older_us"] > 0 and "cutlass_80_" in t["older_top"][0]["kernel"]
        assert any(f.kind == "older_architecture" for f in tensor_core_findings(meta))
