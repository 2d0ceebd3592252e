"""A matmul point's derived values against hand arithmetic, and runs stored by earlier versions read back."""

import json

import pytest

from core.experiment import Context, drive
from core.experiments.matmul import MatmulConfig, run
from core.hardware import published
from core.rows.matmul import MatmulPoint
from tests.conftest import ROOT

RUNS = ROOT / "tests" / "data" / "runs"
# written by `python3 -m core matmul --device cpu --dtypes fp32,bf16 --sizes 64,128 --warmup-ms 5 --rep-ms 20
# --min-reps 3 --json` before rows had a type; the second without the fields runs stored before bb2c934 lacked
BEFORE_TYPED_ROWS = RUNS / "matmul_before_typed_rows.json"
BEFORE_DERIVED_FIELDS = RUNS / "matmul_before_derived_fields.json"
DERIVED = ("pct_of_best", "is_best", "above_peak", "measurement_error", "published_tflops", "pct_of_published")


def test_above_the_datasheet_peak_is_flagged_as_a_measurement_error():
    point = MatmulPoint("bf16", 8, 8, 8, tflops=1200.0, peak_tflops=989.4).checked()
    assert point.above_peak and point.measurement_error and "8×8×8" in point.measurement_error
    point = MatmulPoint("bf16", 8, 8, 8, tflops=700.0, peak_tflops=989.4).checked()
    assert point.above_peak is False and point.measurement_error is None


def test_percentage_of_the_published_figure():
    h100 = published.for_accelerator("NVIDIA H100 SXM")
    bf16 = published.figure(h100, "bf16")
    assert bf16 is not None and bf16.tflops == 794.5  # mamf-finder's published H100 SXM bf16 maximum
    point = MatmulPoint("bf16", 8, 8, 8, tflops=397.25).against(h100)
    assert point.published_tflops == 794.5 and point.pct_of_published == pytest.approx(50.0)
    point = MatmulPoint("int4", 8, 8, 8, tflops=1.0).against(h100)
    assert point.published_tflops is None and point.pct_of_published is None


def test_the_throughput_of_a_timed_point_by_hand():
    timing = {"median_ms": 2.0, "min_ms": 1.0, "p20_ms": 1.6, "p80_ms": 2.5, "rel_error": 0.01}
    timing |= {name: 0 for name in ("mean_ms", "std_ms", "max_ms", "reps", "rel_error_rows", "bytes_moved")}
    timing |= {name: 0 for name in ("intensity_flop_per_byte", "input_sets", "t_start_s", "t_end_s")}
    timing |= {"float32_matmul_precision": "highest", "allow_tf32": False, "samples_ms": [2.0]}
    point = MatmulPoint("fp32", 1000, 1000, 1000, flops=2 * 10**9, peak_tflops=4.0).measured(timing)
    # 2e9 FLOP in 2 ms = 1 TFLOPS; in 1 ms = 2; in 2.5 ms = 0.8; in 1.6 ms = 1.25; 1 of 4 = 25 %
    assert (point.tflops, point.tflops_max, point.tflops_p20, point.tflops_p80) == (1.0, 2.0, 0.8, 1.25)
    assert point.pct_of_peak == 25.0 and point.to_row()["gflops"] == 1000.0


def test_the_engine_stores_the_keys_the_previous_version_stored_in_its_order():
    cfg = MatmulConfig(dtypes=("fp32", "bf16"), sizes=(64, 128), warmup_ms=5.0, rep_ms=5.0, min_reps=3, max_reps=5)
    out, _ = drive(run(cfg, Context(device="cpu", device_name="test CPU")))
    before = json.loads(BEFORE_TYPED_ROWS.read_text())
    assert [list(r) for r in out.rows] == [list(r) for r in before["rows"]]
    assert list(out.meta["best"]["fp32"]) == list(before["meta"]["best"]["fp32"])


def test_a_run_of_the_previous_version_reads_back_as_it_was_stored(store):
    before = json.loads(BEFORE_TYPED_ROWS.read_text())
    store.import_file(BEFORE_TYPED_ROWS)
    assert store.get(before["id"]).rows == before["rows"]


def test_a_run_stored_before_the_derived_fields_gets_them_when_read(store):
    old = json.loads(BEFORE_DERIVED_FIELDS.read_text())
    assert not any(key in row for row in old["rows"] for key in DERIVED)
    store.import_file(BEFORE_DERIVED_FIELDS)
    rows = store.get(old["id"]).rows
    fp32, bf16 = (max(r["tflops"] for r in old["rows"] if r["dtype"] == d) for d in ("fp32", "bf16"))
    # the fixture's throughputs: fp32 0.0411 and 0.0943 TFLOPS, bf16 0.00482 and 0.00840, the larger the best
    assert [r["pct_of_best"] for r in rows] == pytest.approx(
        [100 * 0.041125465741067575 / fp32, 100 * 0.004821127744878066 / bf16, 100.0, 100.0]
    )
    assert [r["is_best"] for r in rows] == [False, False, True, True]
    assert [(r["above_peak"], r["measurement_error"]) for r in rows] == [(False, None)] * 4  # a CPU: no peak
    assert [(r["published_tflops"], r["pct_of_published"]) for r in rows] == [(None, None)] * 4
    assert [{k: v for k, v in r.items() if k not in DERIVED} for r in rows] == old["rows"]


def test_an_old_gpu_run_gets_its_above_peak_flag_and_published_figures(store):
    old = json.loads(BEFORE_DERIVED_FIELDS.read_text())
    old["device"] |= {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "spec": None}
    old["rows"][0] |= {"dtype": "bf16", "tflops": 1000.0, "peak_tflops": 989.4}
    old["rows"][1] |= {"tflops": 397.25}
    store.import_bytes(json.dumps(old).encode())
    rows = store.get(old["id"]).rows
    assert rows[0]["above_peak"] is True and "1000.0 TFLOPS > 989.4" in rows[0]["measurement_error"]
    assert rows[1]["above_peak"] is False
    # bf16's published H100 SXM maximum is 794.5 TFLOPS: 397.25 of it is 50 %; the run's bf16 best is 1000
    assert rows[1]["published_tflops"] == 794.5 and rows[1]["pct_of_published"] == pytest.approx(50.0)
    assert rows[1]["pct_of_best"] == pytest.approx(39.725) and rows[0]["is_best"]


def test_a_matmul_run_s_meta_reads_as_its_views_read_it():
    """The stored CPU run's copy bandwidth and the roofline's slope (read + write: twice the bytes copied once), its
    notes in their order; a run stored before the slope had its own key: the copy's figure counted read + write."""
    from core.result import RunResult
    from core.rows.matmul import MatmulMeta

    run = RunResult.from_dict(json.loads(BEFORE_TYPED_ROWS.read_text()))
    said = MatmulMeta.from_run(run)
    meta = run.meta
    assert said.bandwidth_gbs == meta["roofline_bandwidth_gbs"] == 2 * meta["copy_bandwidth_gbs"]
    assert said.copy_counted == "bytes copied once" and said.clocks == ()
    assert said.notes == (meta["cache_note"], meta["clocks_note"])
    older = MatmulMeta.from_run(
        RunResult.from_dict(run.to_dict() | {"meta": {"copy_bandwidth_gbs": 25.4, "clocks": [{"t_s": 0.0}]}})
    )
    assert (older.bandwidth_gbs, older.copy_counted, older.clocks) == (25.4, "read + write traffic", ({"t_s": 0.0},))


def test_a_point_meets_the_published_maximum_only_like_for_like():
    """The H100 SXM's published bf16 maximum, 794.5 TFLOPS, is the best of a shape search: a searched best point
    meets it (700 / 794.5 = 88.1 %); a fixed 8192³ point is not comparable, and says why."""
    from tests.core.health.test_verdict import H100_SXM

    entries = published.for_device(H100_SXM)
    point = MatmulPoint(dtype="bf16", m=8192, n=8192, k=8192, tflops=700.0, is_best=True).against(entries)
    searched = point.compared(entries, True, H100_SXM)
    assert searched.pct == pytest.approx(100 * 700 / 794.5) and searched.note == "measured on an H100 SXM"
    assert searched.text == f"{100 * 700 / 794.5:.1f}% of the published best (measured on an H100 SXM)"
    fixed = point.compared(entries, False, H100_SXM)
    assert fixed.pct is None and fixed.text == fixed.note
    assert "a fixed 8192×8192×8192 shape against the best of a shape search" in fixed.note
    assert MatmulPoint(dtype="fp64", m=1, n=1, k=1).compared(entries, True, H100_SXM).text == "no published figure"
