"""Profiler attribution by hand: fake profiler events placed in the benchmark's scope and phase ranges."""

from types import SimpleNamespace

from core.measure.kernels import ANNOTATION, HOST_GAP_NAME
from core.measure.profiler import Ranges, attribute


def event(name, start, end, self_us=0.0, kernels=(), device="CPU"):
    return SimpleNamespace(
        name=name,
        time_range=SimpleNamespace(start=start, end=end),
        self_cpu_time_total=self_us,
        kernels=[SimpleNamespace(name=k, duration=us) for k, us in kernels],
        device_type=SimpleNamespace(name=device),
    )


EVENTS = [
    event(f"{ANNOTATION}scope:step", 0, 100, self_us=5),
    event(f"{ANNOTATION}phase:forward", 0, 40, self_us=3),
    event(f"{ANNOTATION}phase:backward", 40, 100, self_us=2),
    event("aten::mm", 10, 20, self_us=10, kernels=[("sgemm", 7.0)]),
    event("aten::add", 50, 60, self_us=4, kernels=[("add_kernel", 1.5), ("add_kernel", 0.5)]),
    event("aten::mm", 150, 160, self_us=9, kernels=[("sgemm", 6.0)]),  # outside every scope: not counted
    event("sgemm", 12, 18, device="CUDA"),  # device events are reached through their launching op only
]


def test_ranges_place_a_time_and_sum_a_name():
    phases = Ranges(EVENTS, "phase")
    # a boundary belongs to the range that starts there
    assert (phases.at(5), phases.at(40), phases.at(70), phases.at(101)) == ("forward", "backward", "backward", None)
    assert Ranges(EVENTS, "scope").total_us("step") == 100


def test_gpu_kernels_hang_on_their_launching_op():
    assert sorted(attribute(EVENTS, cuda=True)) == [
        ("step", "backward", "add_kernel", 0.5),
        ("step", "backward", "add_kernel", 1.5),
        ("step", "forward", "sgemm", 7.0),
    ]


def test_cpu_self_times_partition_the_scope_and_our_ranges_are_the_host_gap():
    items = attribute(EVENTS, cuda=False)
    assert sorted(items) == sorted(
        [
            ("step", "forward", HOST_GAP_NAME, 5.0),
            ("step", "forward", HOST_GAP_NAME, 3.0),
            ("step", "backward", HOST_GAP_NAME, 2.0),
            ("step", "forward", "aten::mm", 10.0),
            ("step", "backward", "aten::add", 4.0),
        ]
    )
    assert sum(us for *_, us in items) == 24.0
