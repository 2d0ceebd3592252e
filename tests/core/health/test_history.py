"""The box's own history: a figure against the same box's earlier runs of the same experiment and settings."""

import pytest

from core.health.check import HealthConfig, HealthReport
from core.health.figures import soak_figures
from core.health.history import history_of, stored_runs
from core.health.verdict import figure_row, overall
from core.store import RunStore
from tests.core.health.test_verdict import gpu, stand_in_soak


def stored(store, device, sustained, when, duration_s=60.0):
    run = stand_in_soak(device, 760.0, sustained, False)
    run.config = {"dtype": "bf16", "duration_s": duration_s}
    run.started_at = f"2026-01-0{when}T00:00:00+00:00"
    store.save(run)
    return run


def test_three_runs_then_a_slower_one_is_flagged_with_both_numbers(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    box = gpu("NVIDIA H100 80GB HBM3", host="node-a", uuid="GPU-1111")
    for day, value in ((1, 700.0), (2, 710.0), (3, 705.0)):
        stored(store, box, value, day)
    slower = stored(store, box, 650.0, 4)
    history = history_of(store, slower)
    found = history["matmul bf16 sustained @ cuda:0"]
    # the earlier runs span 700–710 (median 705); 3 % of 705 = 21.15 is wider, so anything under 700 − 21.15
    assert found.regressed and found.earlier == [700.0, 710.0, 705.0] and found.median == 705.0
    assert "650 TFLOPS now" in found.text and "median 705 TFLOPS" in found.text
    assert not history["matmul bf16 burst @ cuda:0"].regressed  # 760 every time
    rows = [figure_row(f, history.get(f.key)) for f in soak_figures(slower)]
    assert overall(rows) == "below expected"  # 650 / 794.5 = 82 % as well; the flag is the history's
    within = stored(store, box, 680.0, 5)  # 680 ≥ 700 − 21.15: within the spread
    assert not history_of(store, within)["matmul bf16 sustained @ cuda:0"].regressed


def test_another_box_other_settings_and_an_unknown_box_are_not_compared(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    box = gpu("NVIDIA H100 80GB HBM3", host="node-a", uuid="GPU-1111")
    for day, value in ((1, 700.0), (2, 710.0), (3, 705.0)):
        stored(store, box, value, day)
    other_box = stored(store, gpu("NVIDIA H100 80GB HBM3", host="node-b", uuid="GPU-2222"), 500.0, 4)
    assert history_of(store, other_box) == {}
    same_host_other_gpu = stored(store, gpu("NVIDIA H100 80GB HBM3", host="node-a", uuid="GPU-3333"), 500.0, 5)
    assert history_of(store, same_host_other_gpu) == {}
    other_settings = stored(store, box, 500.0, 6, duration_s=10.0)
    assert history_of(store, other_settings) == {}
    no_host = stored(store, {k: v for k, v in box.items() if k != "host"}, 500.0, 7)
    assert history_of(store, no_host) == {}


@pytest.mark.parametrize("earlier", [[], [700.0]])
def test_fewer_than_two_earlier_runs_have_no_spread_to_compare_with(tmp_path, earlier):
    store = RunStore(tmp_path / "runs.sqlite")
    box = gpu("NVIDIA H100 80GB HBM3")
    for day, value in enumerate(earlier, start=1):
        stored(store, box, value, day)
    assert history_of(store, stored(store, box, 100.0, 8)) == {}


def test_the_parts_kept_inside_earlier_health_checks_are_the_boxs_history(tmp_path):
    """A health check stores one run with its parts inside: the next check still compares against them."""
    store = RunStore(tmp_path / "runs.sqlite")
    box = gpu("NVIDIA H100 80GB HBM3", host="node-a", uuid="GPU-1111")
    for day, value in ((1, 700.0), (2, 710.0), (3, 705.0)):
        part = stand_in_soak(box, 760.0, value, False)
        part.config = {"dtype": "bf16", "duration_s": 60.0}
        part.started_at = f"2026-01-0{day}T00:00:00+00:00"
        check = HealthReport(config=HealthConfig(device="cuda:0"), runs=[part], device=box, started_at=part.started_at)
        store.save(check.to_run())
    assert {r.experiment for r in store.list()} == {"health"}  # no part stored on its own
    slower = stored(store, box, 650.0, 4)
    found = history_of(store, slower)["matmul bf16 sustained @ cuda:0"]
    assert found.regressed and found.earlier == [700.0, 710.0, 705.0] and found.median == 705.0
    days = [r.started_at[:10] for r in stored_runs(store, slower.experiment)]  # what Compare's trend draws
    assert days == ["2026-01-04", "2026-01-03", "2026-01-02", "2026-01-01"]
