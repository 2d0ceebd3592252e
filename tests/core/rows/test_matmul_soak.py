"""A soak's sample and summary against hand arithmetic, and a run written before they had a type read back."""

import json

import pytest

from core import rows
from core.experiment import Context, drive
from core.experiments.matmul_soak import SoakConfig, run
from core.measure.soak import Interval
from core.result import RunResult
from core.rows.matmul_soak import SoakSample, SoakSummary
from tests.conftest import ROOT

# written by `python3 -m core matmul-soak --device cpu --duration-s 2 --json` before the soak's rows had a type
BEFORE_TYPED_ROWS = ROOT / "tests" / "data" / "runs" / "matmul_soak_before_typed_rows.json"
GFLOPS = ("GFLOPS", 1e3)


def _before() -> dict:
    return json.loads(BEFORE_TYPED_ROWS.read_text())


def _summary_keys(meta: dict) -> list[str]:
    keys = list(meta)
    return keys[keys.index("burst_tflops") : keys.index("drop_reason") + 1]


def test_a_sample_s_throughput_by_hand():
    sample = SoakSample.of(Interval(3, t_start_s=2.0, t_end_s=3.25, calls=500), "fp32", 512, 2 * 512**3)
    # 500 calls × 268,435,456 FLOP in 1.25 s = 107.374 GFLOPS
    assert sample.tflops == pytest.approx(0.1073741824) and sample.interval_s == 1.25 and sample.t_s == 3.25
    assert sample.to_row()["gflops"] == pytest.approx(107.3741824)


def test_a_gpu_sample_keeps_its_clocks_and_the_fan_out_s_keys_in_order():
    row = {"dtype": "bf16", "size": 8192, "second": 1, "t_s": 1.01, "t_start_s": 0.0, "interval_s": 1.01}
    row |= {"calls": 700, "tflops": 763.4, "gflops": 763400.0, "sm_clock_mhz": 1980.0, "sm_clock_min_mhz": 1965}
    row |= {"power_w": 690.0, "temp_c": 61, "throttle_reasons": ["sw_power_cap"], "throttled": True}
    row |= {"device": "cuda:1", "gpu_index": 1}
    sample = SoakSample.from_row(row)
    assert sample.throttled and sample.throttle_reasons == ["sw_power_cap"] and sample.sm_clock_mhz == 1980.0
    assert sample.extra == {"device": "cuda:1", "gpu_index": 1}
    assert list(sample.to_row().items()) == list(row.items())


def test_the_engine_stores_the_keys_the_previous_version_stored_in_its_order():
    out, _ = drive(run(SoakConfig(dtype="fp32", size=64, duration_s=2), Context(device="cpu", device_name="CPU")))
    before = _before()
    assert [list(r) for r in out.rows] == [list(before["rows"][0])] * len(out.rows)
    assert _summary_keys(out.meta) == _summary_keys(before["meta"]) == list(SoakSummary().to_meta())


def test_the_previous_version_s_summary_is_what_the_summary_of_its_samples_gives():
    before = _before()
    meta = before["meta"]
    samples = [SoakSample.from_row(r) for r in before["rows"]]
    summary = SoakSummary.of(samples, meta["burst_s"], meta["drop_threshold_pct"], GFLOPS)
    assert summary == SoakSummary.from_meta(meta)
    assert summary is not None and summary.to_meta() == {k: meta[k] for k in _summary_keys(meta)}
    # the fixture's two samples: 0.14912 and 0.14510 TFLOPS; the burst the first, sustained the last half (one)
    assert (summary.burst_tflops, summary.sustained_tflops) == (0.14912296279791024, 0.1451032690304344)
    assert summary.drop_pct == pytest.approx(100 * (0.14912296279791024 - 0.1451032690304344) / 0.14912296279791024)


def test_a_run_of_the_previous_version_reads_back_as_it_was_stored(store):
    before = _before()
    assert rows.upgrade(stored := RunResult.from_dict(before)) is stored  # no soak field was added since
    store.import_file(BEFORE_TYPED_ROWS)
    got = store.get(before["id"])
    assert got.rows == before["rows"] and [SoakSample.from_row(r).to_row() for r in got.rows] == before["rows"]
    assert {k: got.meta[k] for k in _summary_keys(before["meta"])} == {
        k: before["meta"][k] for k in _summary_keys(before["meta"])
    }


def test_a_soak_s_meta_reads_each_gpu_s_summary_and_every_note_once():
    from core.rows.matmul_soak import SoakMeta

    run = RunResult.from_dict(_before())
    one = SoakMeta.from_run(run, all_gpus=False)
    assert one.dtype == "fp32" and one.notes == (run.meta["clocks_note"],)
    assert list(one.summaries) == [run.device_info.torch_device]
    assert one.summaries[run.device_info.torch_device].burst_tflops == run.meta["burst_tflops"]
    gpu = run.meta | {"cpu_load_note": "busy"}
    both = RunResult.from_dict(
        run.to_dict() | {"meta": {"dtype": "bf16", "devices": {"cuda:0": gpu, "cuda:1": gpu | {"burst_tflops": 1.0}}}}
    )
    every = SoakMeta.from_run(both, all_gpus=True)
    assert {d: s.burst_tflops for d, s in every.summaries.items()} == {"cuda:0": gpu["burst_tflops"], "cuda:1": 1.0}
    assert every.notes == (run.meta["clocks_note"], "busy")  # each GPU's notes, once


def test_a_run_s_samples_are_its_rows_with_a_throughput_each_with_its_gpu():
    from core.rows.matmul_soak import samples

    rows = [
        {"dtype": "bf16", "size": 8192, "second": 1, "tflops": 650.0, "device": "cuda:0", "gpu_index": 0},
        {"dtype": "bf16", "size": 8192, "second": 1, "tflops": 640.0, "device": "cuda:1", "gpu_index": 1},
        {"status": "unsupported", "reason": "no GPU", "device": "cuda:2"},  # no throughput: no sample
        {"dtype": "fp32", "size": 256, "second": 1, "tflops": 0.5},  # a run on one device: no GPU tag
    ]
    found = samples(rows)
    assert [(s.device, s.tflops) for s in found] == [("cuda:0", 650.0), ("cuda:1", 640.0), (None, 0.5)]
    assert [s.to_row()["gpu_index"] for s in found[:2]] == [0, 1]  # the fan-out's keys kept as stored
