"""How the allocator's history is recorded: what is asked of torch, and when a trace may be incomplete."""

from core.measure import history


class FakeMemory:
    def __init__(self):
        self.calls = []

    def _record_memory_history(self, **kwargs):
        self.calls.append(kwargs)


class FakeTorch:
    class cuda:
        memory = None


def test_events_only_no_stacks_and_a_bounded_buffer():
    assert history.options(1000.0) == {"enabled": "all", "context": None, "stacks": "python", "max_entries": 1000}


def test_start_and_stop_pass_those_options_to_torch():
    fake = FakeTorch()
    fake.cuda.memory = FakeMemory()
    history.start(fake, 5)
    history.stop(fake)
    assert fake.cuda.memory.calls == [
        {"enabled": "all", "context": None, "stacks": "python", "max_entries": 5},
        {"enabled": None},
    ]


def test_a_full_ring_buffer_may_have_lost_events():
    assert not history.overflowed([{}] * 9, 10)
    assert history.overflowed([{}] * 10, 10)
    assert history.overflowed([{}] * 11, 10)
