"""The bounded shape search: its grid by hand, where it starts on each card, its budget on a hand-driven clock, and
its tiny form run on the CPU."""

import pytest

from core.experiment import Context, drive
from core.experiments.matmul import MatmulConfig, run
from core.hardware.specs import match_spec
from core.measure import mamf

H200 = {"kind": "cuda", "name": "NVIDIA H200", "total_memory_bytes": 141 * 2**30}
H200["spec"] = match_spec(H200["name"], H200["total_memory_bytes"]).to_dict()  # pyright: ignore[reportOptionalMemberAccess]
CPU = {"kind": "cpu", "name": "AMD EPYC"}


def mnk(shapes):
    return [(s.m, s.n, s.k) for s in shapes]


def test_the_grid_starts_at_its_centre_then_goes_out_one_step_at_a_time():
    one = mnk(mamf.grid((64, 64, 64), 16, radius=1))
    assert one[:7] == [
        (64, 64, 64),  # the start
        (48, 64, 64),  # one step away, in the order of their offsets (-1,0,0) < (0,-1,0) < …
        (64, 48, 64),
        (64, 64, 48),
        (64, 64, 80),
        (64, 80, 64),
        (80, 64, 64),
    ]
    assert len(one) == 27 == len(set(one))  # 3³
    assert len(mamf.grid((64, 64, 64), 16)) == 125  # 5³: two steps each way
    assert len(mamf.grid((16, 16, 16), 16, radius=1)) == 8  # a dimension of 0 is no shape: 2³ are left


def test_the_search_starts_at_the_cards_published_best_shape():
    bf16 = mamf.plan("bf16", H200, is_cuda=True)
    assert bf16.start == (2048, 2048, 13312) and mnk(bf16.shapes[:1]) == [(2048, 2048, 13312)]
    assert "measured on an H100 SXM; the source says the H200 SXM is the same" in bf16.start_from
    assert (bf16.step, bf16.budget_s) == (256, 30.0)
    assert mamf.plan("fp8", H200, is_cuda=True).start == (1280, 4096, 12032)  # the H200's own fp8 row
    assert mamf.plan("fp8-fast-accum", H200, is_cuda=True).start == (1280, 4096, 12032)  # the same column
    cpu = mamf.plan("fp32", CPU, is_cuda=False)
    assert (cpu.start, cpu.step, cpu.budget_s) == ((256, 256, 256), 64, 3.0) and "no published" in cpu.start_from
    given = mamf.plan("fp32", CPU, is_cuda=False, start=(96, 64, 32), step=8, budget_s=0.5)
    assert (given.start, given.step, given.budget_s, given.start_from) == ((96, 64, 32), 8, 0.5, "the start given")


def test_no_shape_begins_after_the_budget():
    """A clock that moves 1 s each time it is read: read at the start (0), then before shapes 2, 3, 4 (1, 2, 3 s):
    with a 2.5 s budget the 4th shape is refused, and the last reading (4 s) is the time spent."""
    ticks = iter(range(100))
    walk = mamf.Walk(mamf.plan("fp32", CPU, False, budget_s=2.5), clock=lambda: float(next(ticks)))
    assert mnk(walk.shapes()) == [(256, 256, 256), (192, 256, 256), (256, 192, 256)]
    assert walk.summary() | {"start_from": ""} == {
        "start": [256, 256, 256],
        "start_from": "",
        "step": 64,
        "radius": 2,
        "grid": 125,
        "budget_s": 2.5,
        "started": 3,
        "spent_s": 4.0,
        "stopped": "budget spent: 3 of 125 shapes begun",
    }
    done = mamf.Walk(mamf.Plan("fp32", (8, 8, 8), "", 8, 1e9, tuple(mamf.grid((8, 8, 8), 8, 1))))
    assert len(list(done.shapes())) == 8 and done.stopped == "grid done: all 8 shapes"  # 2³: no dimension of 0


def test_the_tiny_search_runs_on_the_cpu_and_stops_at_its_budget():
    """Each point takes at least its 5 ms warm-up and 10 ms of timed calls, so 125 shapes cannot fit in 0.3 s."""
    cfg = MatmulConfig(
        dtypes=("fp32",),
        mamf=True,
        budget_s=0.3,
        start=(64, 64, 64),
        step=16,
        warmup_ms=5.0,
        rep_ms=10.0,
        min_reps=3,
        max_reps=20,
        roofline=False,
    )
    out, progress = drive(run(cfg, Context(device="cpu", device_name="test CPU")))
    search = out.meta["search"]["fp32"]
    assert search["stopped"].startswith("budget spent: ") and search["started"] == len(out.rows) < 125
    assert search["budget_s"] == 0.3 and search["grid"] == 125 and progress[-1].total == 125
    assert (out.rows[0]["m"], out.rows[0]["n"], out.rows[0]["k"]) == (64, 64, 64)  # the start first
    assert {r["label"] for r in out.rows} == {"mamf search"}
    (best,) = [r for r in out.rows if r["is_best"]]
    assert best["tflops"] == max(r["tflops"] for r in out.rows) == out.meta["best"]["fp32"]["tflops"]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"mamf": True, "search": True}, "one shape mode"),
        ({"mamf": True, "start": (64, 64)}, "start: expected M,N,K"),
        ({"mamf": True, "budget_s": 0.01}, "budget_s: must be 0.1…3600"),
        ({"mamf": True, "step": -1}, "step: every dimension"),
    ],
)
def test_bad_search_settings_are_refused(config, message):
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        MatmulConfig(**config)
