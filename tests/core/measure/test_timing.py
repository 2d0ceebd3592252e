"""The CPU timing plan on a fake clock: calls advance the clock by known amounts, so the warm-up's length,
the number of timed calls and every sample follow by hand."""

import pytest

from core.measure import timing
from core.measure.timing import MIN_FLUSH_BYTES, TimingPlan, flush_bytes, reps_for, time_cpu, timed_calls


class FakeClock:
    """A nanosecond clock that only moves when a call (or a flush) says so."""

    def __init__(self, durations_ms):
        self.now = 0
        self.durations = durations_ms  # a function of the call number (1, 2, …)
        self.calls = 0
        self.flushes = 0

    def __call__(self) -> int:
        return self.now

    def op(self) -> None:
        self.calls += 1
        self.now += int(self.durations(self.calls) * 1e6)

    def flush(self) -> None:
        self.flushes += 1
        self.now += 100_000_000  # 100 ms that must never show in a sample


@pytest.fixture
def clock(monkeypatch):
    def install(durations_ms):
        fake = FakeClock(durations_ms)
        monkeypatch.setattr(timing.time, "perf_counter_ns", fake)
        return fake

    return install


def test_reps_fill_the_plan_within_its_bounds():
    plan = TimingPlan(rep_ms=200.0, min_reps=10, max_reps=500)
    assert reps_for(plan, 2.0) == 100  # 200 / 2
    assert reps_for(plan, 0.1) == 500  # 2000, capped
    assert reps_for(plan, 50.0) == 10  # 4, raised to the minimum
    assert reps_for(plan, 0.0) == 500  # a call too quick to time is no division by zero


def test_flush_is_twice_the_l2_and_never_under_256_mib():
    assert MIN_FLUSH_BYTES == 256 * 2**20
    assert flush_bytes(None) == 256 * 2**20
    assert flush_bytes(50 * 2**20) == 256 * 2**20  # an H100's 50 MiB L2: 100 MiB < 256 MiB
    assert flush_bytes(200 * 2**20) == 400 * 2**20


def test_steady_calls(clock):
    fake = clock(lambda i: 2.0)
    samples = time_cpu(fake.op, TimingPlan(warmup_ms=50.0, rep_ms=200.0))
    # warm-up: 25 calls of 2 ms reach 50 ms (settled from the third); then 200 ms / 2 ms = 100 timed calls
    assert samples == [2.0] * 100
    assert fake.calls == 25 + 100


def test_flush_runs_before_each_call_and_outside_its_time(clock):
    fake = clock(lambda i: 2.0)
    samples = timed_calls(fake.op, "cpu", 7, flush=fake.flush)
    assert samples == [2.0] * 7 and fake.flushes == 7


def test_slow_first_calls_stay_in_the_warm_up(clock):
    # 30, 20, 10 ms, then 1 ms: past 50 ms after the third call, but settled (the last three within 2× the
    # fastest) only after the sixth; the median warm-up call, sorted [1, 1, 1, 10, 20, 30][3] = 10 ms → 20 calls
    fake = clock(lambda i: {1: 30.0, 2: 20.0, 3: 10.0}.get(i, 1.0))
    samples = time_cpu(fake.op, TimingPlan(warmup_ms=50.0, rep_ms=200.0, min_reps=10))
    assert samples == [1.0] * 20
    assert fake.calls == 6 + 20


def test_a_warm_up_that_never_settles_stops_at_four_times_its_length(clock):
    # 1, 10, 1, 10 … ms never settles; 4 × 50 = 200 ms is passed at call 38 (19·1 + 19·10 = 209 ms; 37 calls
    # make 199). Median: 19 ones and 19 tens sorted, index 19 → 10 ms → 200 / 10 = 20 calls, from call 39 (1 ms)
    fake = clock(lambda i: 1.0 if i % 2 else 10.0)
    samples = time_cpu(fake.op, TimingPlan(warmup_ms=50.0, rep_ms=200.0, min_reps=10))
    assert samples == [1.0, 10.0] * 10
    assert fake.calls == 38 + 20
