"""The step timer: a clock read at each phase mark, checked against known sleeps."""

import time

from core.measure.step_timer import PhaseTimer


class _SleepyStep:
    """Stands in for TrainStep: known sleeps per phase."""

    def run(self, x, y, mark):
        for phase, s in (("forward", 0.02), ("backward", 0.04), ("optimizer", 0.01), ("zero_grad", 0.0)):
            mark(phase)
            time.sleep(s)
        mark("end")


def test_phase_timer_against_sleeps():
    t0 = time.perf_counter()
    ms = PhaseTimer("cpu").time_step(_SleepyStep(), None, None)
    wall_ms = (time.perf_counter() - t0) * 1e3
    assert ms["forward"] >= 20 and ms["backward"] >= 40 and ms["optimizer"] >= 10
    assert 70 <= ms["step"] <= wall_ms
