"""The kernels of today's mixture-of-experts serving stacks in the groups their work belongs to, on real traces
(tests/data/workload/README.md): vLLM on a B200 (TensorRT-LLM-gen ``bmm_`` expert GEMMs, ``moe::dev`` routing and
finalize, vLLM's RMSNorm, TensorRT-LLM's fmha, a symmetric-memory all-reduce), vLLM and SGLang on MI300X.

Each file's kernels are put in groups here by a table written in the test (every name the file holds must meet
exactly one family of it; the family's group is what the kernel does, as TraceLens' own kernel classifier
(TraceLens/Agent/Analysis/utils/classify_kernels.py, MIT) also files them: expert GEMMs as GEMM, routing, finalize,
quantisation, RoPE and KV-cache writes as elementwise), and the sums by a plain loop over the file's events."""

from __future__ import annotations

import gzip
import json

import pytest

pytest.importorskip("msgspec")

from core.workload.trace.timeline import analyse_trace, read_trace
from tests.core.workload.traces import DATA, SGLANG, VLLM_MOE

B200 = DATA / "tracelens_b200_vllm_moe_kernels.json.gz"

# (a substring of the kernel's name, the group of its work)
B200_FAMILIES = (
    ("bmm_", "matmul"),  # TensorRT-LLM-gen expert GEMMs (fp4 weights; "_bN_" and "swiGlu" in the name)
    ("nvjet_", "matmul"),  # cuBLAS' dense projections
    ("multimem_all_reduce", "communication"),
    ("ncclDevKernel", "communication"),
    ("rms_norm", "normalisation"),  # vllm::fused_add_rms_norm_kernel, vllm::rms_norm_kernel
    ("fmhaSm100a", "attention"),
    ("moe::dev::finalize", "elementwise"),  # the weighted sum of each token's experts (cutlass:: in its types)
    ("moe::dev::routing", "elementwise"),  # top-k histograms and offsets
    ("quantize_with_block_size", "elementwise"),  # fp4 block scaling (flashinfer:: in its arguments)
    ("scaled_fp8_quant", "elementwise"),
    ("reshape_and_cache_flash", "elementwise"),  # the KV-cache write
    ("rotary_embedding", "elementwise"),
    ("direct_copy_kernel", "elementwise"),
    ("FillFunctor", "elementwise"),
    ("masked_fill", "elementwise"),
    ("_copy_page_indices", "elementwise"),
    ("vectorized_gather", "elementwise"),
    ("index_elementwise", "elementwise"),
    ("CUDAFunctorOnSelf_add", "elementwise"),
    ("triton_poi_", "elementwise"),
)


def kernel_times(path) -> dict[str, float]:
    """µs per kernel name, summed over the file's kernel events."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    out: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "kernel":
            out[e["name"]] = out.get(e["name"], 0.0) + e["dur"]
    return out


def by_hand(times: dict[str, float], families) -> dict[str, float]:
    groups: dict[str, float] = {}
    for name, us in times.items():
        (group,) = {g for key, g in families if key in name}  # one family each
        groups[group] = groups.get(group, 0.0) + us
    return groups


def lab_groups(path) -> tuple[dict[str, float], float]:
    tables, meta = analyse_trace(read_trace(path))
    rows = tables.rows()
    groups = {r["group"]: r["total_us"] for r in rows if r["kind"] == "group" and r["count"] and r["group"] != "memory"}
    return groups, meta["kernel_time_us"]  # the kernels' groups (copies and sets are "memory" by their kind)


def test_b200_moe_expert_gemms_are_matmul_and_normalisation_is_the_rms_norms():
    """The issue's headline, "normalisation 52–54 % of kernel time": the two ``bmm_`` expert GEMMs (5,215 µs)
    matched the normalisation rule's ``bn_`` in ``…_biasM_bN_…``. By hand: normalisation is vLLM's RMSNorm alone,
    457.0 µs of 10,862.9 µs (4.2 %); matmul 6,000.0 µs (55.2 %)."""
    times = kernel_times(B200)
    expected = by_hand(times, B200_FAMILIES)
    got, kernel_time = lab_groups(B200)
    assert got == pytest.approx(expected, rel=1e-9)
    total = sum(times.values())
    assert kernel_time == pytest.approx(total, rel=1e-9)
    assert got["normalisation"] / total == pytest.approx(0.042, abs=5e-4)
    assert got["matmul"] / total == pytest.approx(0.552, abs=5e-4)
    assert "other" not in got  # every kernel of the file meets a rule


def test_b200_finalize_routing_and_flashinfer_arguments_take_no_gemm_or_attention_group():
    """``moe::dev::finalize`` (``cutlass::bfloat16_t`` in its template) read matmul through the CUTLASS rule, and
    TensorRT-LLM's fp4 quantiser (``flashinfer::QuantizationSFLayout`` in its arguments) attention through
    "flash": by the rules' own report, each is now matched by the rule that names what it does."""
    _, meta = analyse_trace(read_trace(B200))
    rules = {r["rule"]: r for r in meta["rules"] if r["count"]}
    times = kernel_times(B200)

    def summed(key: str) -> float:
        return sum(us for name, us in times.items() if key in name)

    moe = next(r for name, r in rules.items() if name.startswith("MoE routing and finalize"))
    assert moe["group"] == "elementwise"
    assert moe["us"] == pytest.approx(summed("moe::dev::finalize") + summed("moe::dev::routing"), rel=1e-9)
    bmm = next(r for name, r in rules.items() if name.startswith("TensorRT-LLM-gen"))
    assert (bmm["group"], bmm["us"]) == ("matmul", pytest.approx(summed("bmm_"), rel=1e-9))
    attention = [r for r in rules.values() if r["group"] == "attention"]
    assert sum(r["us"] for r in attention) == pytest.approx(summed("fmhaSm100a"), rel=1e-9)
    assert "CUTLASS" not in rules  # no CUTLASS GEMM runs here: its rule took the finalize


# The MI300X serving steps (vLLM's MoE decode through HIP graphs, SGLang's Qwen3-8B decode)
MI300X_FAMILIES = (
    ("_matmul_ogs_", "matmul"),  # triton_kernels' MoE GEMMs
    ("Cijk_", "matmul"),
    ("Rmsnorm2dFwd", "normalisation"),  # CK's RMSNorm
    ("add_rmsnorm_quant", "normalisation"),  # aiter's RMSNorm fused with its quantisation
    ("unified_attention", "attention"),
    ("paged_attention", "attention"),
    ("_finalize_matmul_scatter", "elementwise"),  # MoE finalize
    ("_combined_routing", "elementwise"),
    ("_topk_forward", "elementwise"),
    ("_sum_bitmatrix", "elementwise"),
    ("rotary_embedding", "elementwise"),
    ("reshape_and_cache", "elementwise"),
    ("store_kvcache", "elementwise"),
    ("act_and_mul", "elementwise"),  # SGLang's SiLU-and-mul
)


@pytest.mark.parametrize("path", [VLLM_MOE, SGLANG], ids=lambda p: p.name)
def test_mi300x_serving_kernels_of_known_families_are_in_their_groups(path):
    """Every kernel of a family in the table is in its group, by the rules' per-kernel report; rotary
    embeddings were "embedding" (a lookup table's group), SGLang's ``act_and_mul`` and ``store_kvcache`` and
    triton_kernels' routing "other"."""
    tables, _ = analyse_trace(read_trace(path))
    rows = tables.rows()
    listed = {r["name"]: r["group"] for r in rows if r["kind"] == "kernel"}
    checked = 0
    for name, group in listed.items():
        families = {g for key, g in MI300X_FAMILIES if key in name}
        if families:
            assert families == {group}, name
            checked += 1
    assert checked >= 10
    times = kernel_times(path)
    rotary = sum(us for name, us in times.items() if "rotary_embedding" in name)
    _, meta = analyse_trace(read_trace(path))
    rule = next(r for r in meta["rules"] if r["rule"].startswith("rotary"))
    assert rotary > 0 and rule["us"] == pytest.approx(rotary, rel=1e-9)
    assert next(r for r in meta["rules"] if r["rule"].startswith("embedding"))["count"] == 0
