"""The matmul soak: burst and sustained by hand, an injected throttle flagged, a real CPU run, bad input."""

import json
import statistics
import threading
import time

import numpy as np
import pytest

from core import cli as core_cli
from core import registry
from core.errors import ConfigError
from core.experiment import Context, drive
from core.experiments.matmul_soak import SoakConfig, run
from core.fanout import submit_all
from core.measure import soak
from tests.factories import soak_summary

CPU = Context(device="cpu", device_name="test CPU")
GFLOPS = ("GFLOPS", 1e3)
CONTRACT = ("burst_tflops", "sustained_tflops", "drop_pct", "drop_flagged", "drop_threshold_pct", "drop_reason")


class Throttle:
    """A fake device behind the timing seam: each call takes ``fast_s`` until ``at_s`` seconds have passed
    (warm-up included), then ``slow_s``. A lap's calls all take the time of the moment the lap began."""

    def __init__(self, fast_s: float, slow_s: float, at_s: float) -> None:
        self.fast_s, self.slow_s, self.at_s, self.now = fast_s, slow_s, at_s, 0.0

    def __call__(self, n: int) -> float:
        lap = n * (self.fast_s if self.now < self.at_s else self.slow_s)
        self.now += lap
        return lap


def test_burst_and_sustained_of_hand_made_samples():
    tflops = [100.0, 110.0, 105.0, 90.0, 80.0, 85.0, 82.0, 81.0]
    rows = [{"second": i + 1, "t_start_s": float(i), "tflops": t} for i, t in enumerate(tflops)]
    s = soak_summary(rows, burst_s=3.0, threshold_pct=10.0, unit=GFLOPS)
    assert s["burst_tflops"] == 110.0  # best of the samples begun at 0, 1 and 2 s
    assert s["sustained_tflops"] == 81.5  # median of the last four: 80, 85, 82, 81
    assert s["drop_pct"] == pytest.approx(100 * (110 - 81.5) / 110)  # 25.9 %
    assert s["drop_flagged"] and s["drop_threshold_pct"] == 10.0
    assert s["burst_second"] == 2 and s["sustained_from_second"] == 5 and s["samples"] == 8
    assert s["drop_reason"].startswith("sustained 74.1% of burst (110,000.0 → 81,500.0 GFLOPS): a 25.9% drop")
    assert s["sustained_slowdown_reasons"] is None  # no NVML column: nothing claimed about throttling
    odd = soak_summary(rows[:5], burst_s=1.0, threshold_pct=30.0, unit=GFLOPS)
    assert odd["burst_tflops"] == 100.0 and odd["sustained_tflops"] == 90.0  # last half of 5: 105, 90, 80
    assert not odd["drop_flagged"] and "within the 30% threshold" in odd["drop_reason"]
    assert soak_summary([], 5.0, 10.0, GFLOPS) == {}


def test_the_reason_names_clocks_and_slowdowns_where_nvml_was_read():
    rows = [
        {"second": i + 1, "t_start_s": float(i), "tflops": t, "sm_clock_mhz": c, "throttle_reasons": r}
        for i, (t, c, r) in enumerate(
            [(800.0, 1965, []), (790.0, 1900, []), (660.0, 1580, ["sw_power_cap"]), (650.0, 1570, ["sw_power_cap"])]
        )
    ]
    s = soak_summary(rows, burst_s=2.0, threshold_pct=10.0, unit=("TFLOPS", 1.0))
    assert s["burst_sm_clock_mhz"] == 1965 and s["sustained_sm_clock_mhz"] == 1575
    assert s["drop_reason"].endswith("; SM clock 1965 → 1575 MHz; NVML slowdown reasons: sw_power_cap")
    quiet = [dict(r, throttle_reasons=["gpu_idle"], tflops=800.0) for r in rows]
    assert soak_summary(quiet, 2.0, 10.0, ("TFLOPS", 1.0))["drop_reason"].endswith("no throttling seen")


def test_an_injected_throttle_is_flagged():
    fake = Throttle(fast_s=1e-3, slow_s=1.25e-3, at_s=8.0)
    cfg = SoakConfig(dtype="fp32", size=64, duration_s=20, burst_s=5, drop_threshold_pct=10)
    out, progress = drive(run(cfg, CPU, timer=fake))
    rows, meta = out.rows, out.meta
    work = 2 * 64**3
    fast, slow = work / 1e-3 / 1e12, work / 1.25e-3 / 1e12
    assert len(rows) == 20 and [r["second"] for r in rows] == list(range(1, 21))
    assert all(1.0 <= r["interval_s"] < 1.0 + soak.BATCH_S for r in rows)  # whole calls: a second and a little more
    assert rows[-1]["t_s"] >= 20.0
    assert meta["burst_tflops"] == pytest.approx(fast) and meta["sustained_tflops"] == pytest.approx(slow)
    assert meta["drop_pct"] == pytest.approx(20.0) and meta["drop_flagged"] is True
    assert "a 20.0% drop, over the 10% threshold" in meta["drop_reason"]
    assert meta["timer"] == "injected" and meta["warmup"]["calls"] >= 3
    assert [p.rows for p in progress[1:]] == [(r,) for r in rows]  # every sample streamed once, as it closed
    lenient = drive(
        run(SoakConfig(dtype="fp32", size=64, duration_s=20, drop_threshold_pct=25), CPU, Throttle(1e-3, 1.25e-3, 8.0))
    )
    assert lenient[0].meta["drop_flagged"] is False and lenient[0].meta["burst_s"] == 5.0


def test_a_call_longer_than_a_sample_is_refused():
    with pytest.raises(ConfigError, match=r"one call takes 2\.00 s.*choose a smaller size"):
        drive(run(SoakConfig(dtype="fp32", size=64, duration_s=4), CPU, Throttle(2.0, 2.0, 0.0)))


def _hand_summary(rows: list[dict], burst_s: float) -> tuple[float, float]:
    t = np.array([r["tflops"] for r in rows])
    starts = np.array([r["t_start_s"] for r in rows])
    return float(t[starts < burst_s].max()), float(np.median(t[len(t) // 2 :]))


def test_a_real_cpu_run_through_the_cli_and_worker_stores_rows_and_meta(store, capsys):
    code = core_cli.main(["matmul-soak", "--device", "cpu", "--duration-s", "2", "--size", "64", "--json"])
    assert code == 0, capsys.readouterr().err
    printed = json.loads(capsys.readouterr().out)
    stored = store.get(printed["id"])
    assert stored.status == "ok" and stored.device["kind"] == "cpu"
    rows, meta = stored.rows, stored.meta
    # a second at least per sample, and 2 s covered (a loaded machine may stretch one sample over both)
    assert rows[-1]["t_s"] >= 2.0 and all(r["interval_s"] >= 1.0 and r["calls"] >= 1 for r in rows)
    for r in rows:  # throughput = whole calls × 2·64³ FLOP / the sample's own length
        assert r["tflops"] == pytest.approx(r["calls"] * 2 * 64**3 / r["interval_s"] / 1e12)
        assert "sm_clock_mhz" not in r  # no NVML on a CPU: absent, never made up
    assert meta["dtype"] == "fp32" and meta["size"] == 64 and meta["burst_s"] == 0.5  # a quarter of 2 s
    burst, sustained = _hand_summary(rows, meta["burst_s"])
    assert meta["burst_tflops"] == pytest.approx(burst) and meta["sustained_tflops"] == pytest.approx(sustained)
    assert meta["drop_pct"] == pytest.approx(100 * (burst - sustained) / burst)
    assert meta["drop_flagged"] == (meta["drop_pct"] > meta["drop_threshold_pct"] == 10.0)
    assert set(CONTRACT) <= set(meta) and "NVML" in meta["clocks_note"]
    print(f"CPU soak: burst {burst * 1e3:.2f} GFLOPS, sustained {sustained * 1e3:.2f}, drop {meta['drop_pct']:.1f}%")


def test_a_dtype_the_cpu_cannot_run_is_unsupported_with_the_reason():
    from core.errors import Unsupported

    with pytest.raises(Unsupported, match="unsupported on test CPU: TF32 is a mode of NVIDIA tensor cores"):
        drive(run(SoakConfig(dtype="tf32", size=64, duration_s=2), CPU))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"dtype": "fp7"}, "dtype: 'fp7' not one of"),
        ({"size": -1}, "size: must be 1…131072"),
        ({"duration_s": 1}, "duration_s: must be 2…1800 seconds"),
        ({"duration_s": 5000}, "duration_s: must be 2…1800"),
        ({"duration_s": float("nan")}, "duration_s"),
        ({"burst_s": -1}, "burst_s: must be more than 0"),
        ({"duration_s": 4, "burst_s": 3}, "burst_s: 3 s is more than half of the 4-s run"),
        ({"drop_threshold_pct": 0}, "drop_threshold_pct: must be between 0 and 100"),
        ({"drop_threshold_pct": 100}, "drop_threshold_pct"),
    ],
)
def test_bad_config_is_refused_naming_the_option(values, message):
    with pytest.raises(ConfigError, match=message):
        registry.get("matmul-soak").make_config(values)


def test_a_burst_window_too_long_for_the_default_duration_is_refused_before_any_work():
    with pytest.raises(ConfigError, match="burst_s: 15 s is more than half of the 20-s run"):
        drive(run(SoakConfig(burst_s=15), CPU))  # the CPU's default 20 s


def test_bad_input_from_the_cli_exits_2(capsys):
    assert core_cli.main(["matmul-soak", "--device", "cpu", "--duration-s", "0.5", "--no-save"]) == 2
    assert "duration_s" in capsys.readouterr().err


def test_every_gpu_at_once_compares_the_gpus_second_by_second(manager, store):
    """The fan-out with hand-written children (no GPU here): one run, each GPU's summary under meta.devices."""
    from tests.core.test_fanout import Children, gpu

    exp = registry.get("matmul-soak")
    children = Children()
    parent = submit_all(manager, exp, exp.make_config({"duration_s": 4}), gpus=(gpu(0), gpu(1)), submit_child=children)

    def rows(tflops):
        return [
            {"dtype": "bf16", "size": 8192, "second": i + 1, "t_start_s": float(i), "tflops": t}
            for i, t in enumerate(tflops)
        ]

    def finish():
        children.finish("cuda:0", rows([800.0, 790.0, 780.0, 785.0]))
        children.finish("cuda:1", rows([800.0, 700.0, 600.0, 610.0]))

    threading.Thread(target=finish).start()
    merged = parent.wait(30)
    assert merged is not None and merged.status == "ok"
    node = {d["device"]: d for d in merged.meta["node"]["per_device"]}
    assert merged.meta["node"]["points"] == 4  # one point per second of the soak
    ratios_1 = [b / statistics.median([a, b]) for a, b in ((800, 800), (790, 700), (780, 600), (785, 610))]
    assert node["cuda:1"]["relative"] == pytest.approx(statistics.median(ratios_1))
    assert node["cuda:1"]["flagged"] and not node["cuda:0"]["flagged"]


def test_a_cancelled_soak_keeps_its_samples_and_claims_no_summary(manager, store):
    job = manager.submit("matmul-soak", {"size": 64, "duration_s": 60}, "cpu")
    deadline = time.monotonic() + 120
    while not job.rows and job.state != "done" and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the job's own state: the first sample has been streamed
    assert job.rows, job.message
    job.cancel()
    run = job.wait(60)
    assert run is not None and run.status == "cancelled"
    stored = store.get(run.id)
    assert len(stored.rows) >= 1 and stored.rows[0]["second"] == 1
    assert "burst_tflops" not in stored.meta  # a shortened soak has no burst/sustained verdict


def test_a_flagged_drop_on_a_busy_cpu_says_other_processes_may_account_for_it(monkeypatch):
    from core.measure import timing

    monkeypatch.setattr(timing, "cpu_load", lambda: {"cpu_load_1min": 5.0, "cpu_load_note": "the CPU was busy"})
    out, _ = drive(run(SoakConfig(dtype="fp32", size=64, duration_s=10), CPU, Throttle(1e-3, 2e-3, 3.0)))
    assert out.meta["drop_flagged"] and out.meta["drop_pct"] == pytest.approx(50.0)
    assert out.meta["drop_reason"].endswith("other processes may account for the drop")
    monkeypatch.setattr(timing, "cpu_load", lambda: {"cpu_load_1min": 0.1})
    quiet, _ = drive(run(SoakConfig(dtype="fp32", size=64, duration_s=10), CPU, Throttle(1e-3, 2e-3, 3.0)))
    assert "other processes" not in quiet.meta["drop_reason"]


@pytest.mark.gpu
def test_a_short_gpu_soak_is_bf16_with_nvml_columns_where_nvml_reads():
    import torch

    ctx = Context(device="cuda:0", device_name=torch.cuda.get_device_name(0))
    out, _ = drive(run(SoakConfig(size=4096, duration_s=4), ctx))
    assert out.meta["dtype"] == "bf16" and len(out.rows) >= 3 and out.meta["unit"] == "TFLOPS"
    assert all(r["tflops"] == pytest.approx(r["calls"] * 2 * 4096**3 / r["interval_s"] / 1e12) for r in out.rows)
    if out.meta["clocks_note"] is None:  # NVML answered: every sample carries what it read in that second
        assert all(isinstance(r.get("sm_clock_mhz"), float) and r.get("throttle_reasons") is not None for r in out.rows)
    assert set(CONTRACT) <= set(out.meta)
