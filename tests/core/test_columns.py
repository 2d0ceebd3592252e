"""Keys versus metrics of a run's rows, and the one figure a run is known by."""

import pandas as pd

from core.columns import fmt, headline, headline_metric, split_columns, tokens


def test_tokens_split_on_underscores_and_dashes():
    assert tokens("Time-ms_median") == {"time", "ms", "median"}


def test_measured_columns_are_metrics_and_the_rest_keys():
    df = pd.DataFrame(
        {
            "dtype": ["fp32", "bf16"],
            "m": [1024, 2048],
            "median_ms": [1.5, 0.5],
            "peak_bytes": [10, 20],  # integer, but a measured quantity by its name
            "tflops": [3.0, 9.0],
            "status": ["ok", "ok"],  # free text: neither
            "samples_ms": [[1.0], [2.0]],  # lists: not hashable, neither
            "fused": [True, False],  # booleans are keys
        }
    )
    assert split_columns(df) == (["dtype", "m", "fused"], ["median_ms", "peak_bytes", "tflops"])


def test_headline_prefers_throughput_then_time_then_memory():
    assert headline_metric(["median_ms", "tflops", "peak_bytes"]) == ("tflops", "max")
    assert headline_metric(["gbs", "median_ms"]) == ("gbs", "max")
    assert headline_metric(["min_ms", "median_ms"]) == ("median_ms", "min")  # a median is preferred
    assert headline_metric(["peak_bytes"]) == ("peak_bytes", "max")
    assert headline_metric(["loss"]) == ("loss", "max")
    assert headline_metric([]) is None


def test_fmt_four_significant_digits():
    assert fmt(312.4567) == "312.5" and fmt(0.000123456) == "0.0001235" and fmt(1234567) == "1.235e+06"
    assert fmt(True) == "True" and fmt(float("nan")) == "nan" and fmt("fp32") == "fp32"


def test_headline_of_rows():
    rows = [{"dtype": "fp32", "tflops": 0.0951}, {"dtype": "bf16", "tflops": 0.0312}]
    assert headline(rows, is_cuda=False) == "max GFLOPS 95.1"  # 0.0951 TFLOPS × 1000
    assert headline([{"n": 1, "median_ms": 2.5}, {"n": 2, "median_ms": 1.25}]) == "min median_ms 1.25"
    assert headline([{"step": 1}, {"step": 2}]) == "2 rows" and headline([{"step": 1}]) == "1 row"
    assert headline([]) == ""


def test_a_run_is_known_by_what_its_rows_measured_never_by_a_reference():
    """The shipped H200 runs: the matmul run's best measured point (the datasheet's fp8 1979 sits in the same rows as
    peak_tflops), the step benchmark's tokens/s, a training step's peak bytes — each read from the file's own rows."""
    from pathlib import Path

    from core.columns import headline
    from core.store import parse_runs_file
    from core.units import bytes_text

    runs = parse_runs_file((Path(__file__).parents[2] / "examples" / "nvidia-h200-2026-11-26.json").read_bytes())
    by = {}
    for run in runs:
        by.setdefault(run.experiment, run)
    matmul = by["matmul"]
    best = max(r["tflops"] for r in matmul.rows if r.get("status") == "ok" and r.get("tflops") is not None)
    assert headline(matmul.rows, True, "matmul") == f"max TFLOPS {best:.4g}" == "max TFLOPS 1341"
    assert max(r["peak_tflops"] or 0 for r in matmul.rows) == 1978.9  # there, and never the headline
    bench = by["step-bench"]
    tokens = max(r["tokens_per_s"] for r in bench.rows if r.get("kind") == "precision" and r["status"] == "ok")
    assert headline(bench.rows, True, "step-bench") == f"max {tokens:,.0f} tokens/s"
    memory = by["train-memory"]
    assert (
        headline(memory.rows, True, "train-memory")
        == f"max peak {bytes_text(max(r['total_bytes'] for r in memory.rows))}"
    )
