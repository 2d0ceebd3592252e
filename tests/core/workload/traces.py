"""The real profiler traces the workload tests read (tests/data/workload/README.md: source, commit, licence) and
the one way the tests read a file's events by themselves, apart from the lab's reader."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal

from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "workload"
EVENT_SYNC = DATA / "hta_a100_event_sync.json.gz"
ALEXNET = DATA / "hta_a100_alexnet.json.gz"
STEP = DATA / "hta_v100_step1012_trimmed.json.gz"
RECSYS = DATA / "hta_recsys_sampled_rank0.json.gz"
BERT = DATA / "tracelens_h100_bert_small.json.gz"  # with_stack: python_function events around every operator
VIT = DATA / "tracelens_h100_nsfw_vit.json.gz"
QWEN_H100 = DATA / "tracelens_h100_qwen_chat.json.gz"  # one model on two vendors' GPUs, recorded alike
QWEN_MI300 = DATA / "tracelens_mi300_qwen_chat.json.gz"
CONV_BACKWARD = DATA / "tracelens_mi300_resnet_conv_backward.json.gz"  # three convolution_backward calls, trimmed
VLLM_MOE = DATA / "tracelens_mi300x_vllm_moe_decode.json.gz"  # HIP graphs, Triton MoE GEMMs, GPU names ""
SGLANG = DATA / "tracelens_mi300x_sglang_decode.json.gz"  # HIP graphs, a 463 ms device→host copy
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}  # the categories of a GPU activity


def trace_events(path, exact: bool = False) -> list[dict]:
    """The file's complete ("X") events; ``exact``: times as exact decimals (epoch µs with ns digits lose them
    as floats)."""
    with gzip.open(path) as f:
        events = json.load(f, parse_float=Decimal if exact else float)["traceEvents"]
    return [e for e in events if e.get("ph") == "X"]
