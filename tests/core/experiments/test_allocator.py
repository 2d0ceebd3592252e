"""Allocator lab: scenario engine, custom-step validation, CPU lifecycle, one process per setting, GPU checks."""

import pytest

from core.errors import ConfigError, Unsupported
from core.experiment import Context, Output
from core.experiment import drive as drive_generator
from core.experiments.allocator import AllocatorConfig, check_size, run, scenario_steps, worker_env
from core.memory.steps import StepOutOfMemory
from core.units import MIB

CPU = Context(device="cpu", device_name="test CPU")
SIZE_MIB = 64  # above glibc's 32 MiB mmap ceiling, so a free goes straight back to the OS


def drive(cfg, ctx=CPU):
    """Run the generator like the worker does: progress rows as they come, then the Output."""
    out, events = drive_generator(run(cfg, ctx))
    return [row for event in events for row in event.rows], out


# --- custom steps --------------------------------------------------------------------------------


def test_config_validates_itself():
    with pytest.raises(ConfigError, match="size_mib must be between 1 and"):
        AllocatorConfig(size_mib=0)
    with pytest.raises(ConfigError, match="multiple of 8"):
        AllocatorConfig(scenario="fragmentation", size_mib=20)
    with pytest.raises(ConfigError, match="only for the custom scenario"):
        AllocatorConfig(steps=("alloc a 1",))
    with pytest.raises(ConfigError, match="no tensor named 'b'"):
        AllocatorConfig(scenario="custom", steps=("alloc a 1", "free b"))
    with pytest.raises(ConfigError, match="history_entries"):
        AllocatorConfig(history_entries=-1)


@pytest.mark.parametrize(
    "conf, words",
    [
        ("expandable_segments:yes", "True or False"),
        ("garbage_collection_threshold:1.5", "between 0 and 1"),
        ("max_split_size_mb:10", "above 20"),
        ("max_split_size_mb", "not key:value"),
        ("cache_everything:True", "unknown key"),
        ("backend:cudaMalloc", "native or cudaMallocAsync"),
    ],
)
def test_alloc_conf_typos_fail_before_a_worker_starts(conf, words):
    with pytest.raises(ConfigError, match=words):
        AllocatorConfig(alloc_conf=conf)


def test_check_size_caps_one_tensor_by_free_memory():
    check_size(100, 100 * MIB)
    with pytest.raises(ConfigError, match="more than the 99 MiB free"):
        check_size(100, 99 * MIB)
    check_size(10**6, None)  # unknown free memory: nothing to cap by


# --- scenarios -----------------------------------------------------------------------------------


def test_built_in_scenarios_follow_the_seed():
    lifecycle = [s.text for s in scenario_steps(AllocatorConfig(size_mib=7))]
    assert lifecycle == [
        "alloc a 7",
        "alloc b 7",
        "to_cpu b",
        "alloc c 7",
        "alloc c 7",
        "alloc d 7",
        "free d",
        "alloc_cpu e 7",
        "to_device e",
        "empty_cache",
    ]
    backward = [s.text for s in scenario_steps(AllocatorConfig(scenario="backward-peak", size_mib=7))]
    assert "scale y x" in backward and "backward y" in backward and "scale_backward x" in backward
    frag = scenario_steps(AllocatorConfig(scenario="fragmentation", size_mib=64))
    assert [s.text for s in frag][:3] == ["alloc big 64", "free big", "alloc p0 8"]
    assert frag[-2].text == "alloc q 16"  # twice a hole: no single hole can take it


def test_worker_env_passes_the_setting_and_overrides_a_parent_default():
    assert (
        worker_env(AllocatorConfig(alloc_conf="expandable_segments:True"))["PYTORCH_CUDA_ALLOC_CONF"]
        == "expandable_segments:True"
    )
    assert worker_env(AllocatorConfig())["PYTORCH_CUDA_ALLOC_CONF"] == ""


@pytest.mark.parametrize("scenario", ["backward-peak", "fragmentation"])
def test_caching_allocator_scenarios_are_unsupported_on_cpu(scenario):
    with pytest.raises(Unsupported, match="unsupported on test CPU: .*CUDA caching allocator"):
        drive(AllocatorConfig(scenario=scenario, size_mib=16))


def test_cpu_lifecycle_frees_at_once():
    progress, out = drive(AllocatorConfig(size_mib=SIZE_MIB))
    assert isinstance(out, Output)
    rows = {r["op"] or "start": r for r in out.rows}
    assert len(out.rows) == 11 and progress == out.rows  # baseline + 10 steps, each reported as it finished
    size = SIZE_MIB * 2**20
    # live tensor bytes, by hand: a, b (to('cpu') is a no-op on a CPU), c, d …
    assert [r["live_host_bytes"] // size for r in out.rows] == [0, 1, 2, 2, 3, 3, 4, 3, 4, 4, 4]
    assert all(r["allocated_bytes"] is None and r["segment_map"] is None for r in out.rows)  # CUDA-only: None
    # RSS follows: +size per new tensor, and `del d` gives the memory back to the OS at once.
    rss = [r["rss_bytes"] for r in out.rows]
    deltas = {out.rows[i]["op"]: rss[i] - rss[i - 1] for i in range(1, len(rss))}
    assert deltas["free d"] == pytest.approx(-size, rel=0.1)
    assert deltas["alloc d 64"] == pytest.approx(size, rel=0.1)
    # re-creating c needs room for two c's for a moment: the RSS high-water mark shows it.
    again = out.rows[5]
    assert again["step"].endswith("again")
    assert again["max_rss_bytes"] - out.rows[4]["rss_bytes"] == pytest.approx(size, rel=0.15)
    assert rows["to_cpu b"]["note"].startswith("no-op")
    assert out.meta["alloc_conf_seen"] in ("default", out.meta["alloc_conf_env"]["PYTORCH_CUDA_ALLOC_CONF"])


def test_custom_steps_run_on_cpu_including_autograd():
    cfg = AllocatorConfig(scenario="custom", steps=("alloc_grad x 4", "matmul y x", "backward y", "free y"))
    _, out = drive(cfg)
    size = 4 * 2**20
    # x, then y (same size), then x.grad (same size), then y goes
    assert [r["live_host_bytes"] for r in out.rows] == [0, size, 2 * size, 3 * size, 2 * size]


def test_a_step_beyond_memory_stops_with_the_partial_timeline():
    # A host copy is not part of the device estimate checked up front: the per-step guard stops it.
    cfg = AllocatorConfig(scenario="custom", steps=("alloc a 1", "alloc_cpu b 1048576", "free a"))
    gen = run(cfg, CPU)
    rows = []
    with pytest.raises(StepOutOfMemory, match="out of memory.*step 2/3 'alloc_cpu b 1048576'"):
        while True:
            rows.extend(next(gen).rows)
    assert [r["status"] for r in rows] == ["ok", "ok", "oom"]
    assert rows[-1]["live_host_bytes"] == 2**20  # a is still there, b never existed


# --- through the worker: one fresh process per setting -------------------------------------------


def test_each_setting_runs_in_its_own_process_and_reports_what_it_saw(manager):
    settings = ["", "expandable_segments:True", "garbage_collection_threshold:0.6"]
    jobs = [
        manager.submit("allocator", {"scenario": "custom", "steps": ["alloc a 1", "free a"], "alloc_conf": s}, "cpu")
        for s in settings
    ]
    runs = [job.wait(180) for job in jobs]
    assert [r.status for r in runs] == ["ok"] * 3, [r.error for r in runs]
    assert [r.meta["alloc_conf_seen"] for r in runs] == ["default", *settings[1:]]
    assert all(row["alloc_conf_seen"] == r.meta["alloc_conf_seen"] for r in runs for row in r.rows)
    assert [r.meta["alloc_conf_env"]["PYTORCH_CUDA_ALLOC_CONF"] for r in runs] == settings
    pids = {r.meta["pid"] for r in runs}
    assert len(pids) == 3 and all(r.meta["worker"]["fresh"] for r in runs)


def test_cpu_oom_through_the_worker_keeps_rows_and_the_queue_usable(manager):
    bad = manager.submit("allocator", {"scenario": "custom", "steps": ["alloc a 1", "alloc_cpu b 1048576"]}, "cpu")
    run_ = bad.wait(180)
    assert run_.status == "error" and "out of memory" in run_.error and "step 2/2" in run_.error
    assert run_.meta.get("oom") is True
    assert [r["status"] for r in run_.rows] == ["ok", "ok", "oom"]
    good = manager.submit("allocator", {"scenario": "custom", "steps": ["alloc a 1"]}, "cpu").wait(180)
    assert good.status == "ok"


# --- GPU -----------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_backward_peak_matches_the_autograd_arithmetic():
    import torch

    _, out = drive(
        AllocatorConfig(scenario="backward-peak", size_mib=256),
        Context(device="cuda:0", device_name=torch.cuda.get_device_name(0)),
    )
    forms = {f["form"]: f["peak_over_x"] for f in out.meta["backward_peak"]}
    # y = 5*x keeps y: x + y + grad of y + x.grad = 4 sizes; (5*x) is dropped after mean: 3 sizes.
    assert forms["y = 5*x; y.mean().backward()"] == pytest.approx(4.0, abs=0.05)
    assert forms["(5*x).mean().backward()"] == pytest.approx(3.0, abs=0.05)


@pytest.mark.gpu
def test_a_cuda_oom_mid_run_stops_at_its_step():
    """Memory taken after the guard looked (another process, here a per-process cap the guard cannot see):
    the real CUDA out-of-memory error stops the scenario at its step, with the rows before it kept."""
    import torch

    total_mib = torch.cuda.mem_get_info(0)[1] // 2**20
    piece = total_mib // 5  # two fit under half the card, the third does not; three fit in what is free
    steps = (f"alloc a {piece}", f"alloc b {piece}", f"alloc c {piece}", "free a")
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(0.5, 0)
    try:
        gen = run(AllocatorConfig(scenario="custom", steps=steps), Context("cuda:0", torch.cuda.get_device_name(0)))
        rows = []
        with pytest.raises(StepOutOfMemory, match=f"out of memory at step 3/4 'alloc c {piece}'"):
            while True:
                rows.extend(next(gen).rows)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        torch.cuda.empty_cache()
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "oom"]
    assert rows[2]["allocated_bytes"] >= 2 * piece * MIB


@pytest.mark.gpu
def test_a_scenario_larger_than_the_card_is_refused_and_the_worker_stays_usable(manager):
    import torch

    piece = torch.cuda.mem_get_info(0)[0] // 2**20 // 3 + 1  # three fit in no way
    steps = [f"alloc a {piece}", f"alloc b {piece}", f"alloc c {piece}", "free a"]
    run_ = manager.submit("allocator", {"scenario": "custom", "steps": steps}, "cuda:0").wait(600)
    assert (run_.status, run_.error_kind, run_.rows) == ("error", "refused", []), run_.error
    assert run_.meta["refused"]["need_bytes"] == 3 * piece * MIB
    after = manager.submit("allocator", {"scenario": "custom", "steps": ["alloc a 16", "free a"]}, "cuda:0").wait(600)
    assert after.status == "ok"


def test_segment_view_finds_the_largest_hole_by_hand():
    from core.memory.segments import segment_view

    seg = {
        "address": 1000,
        "total_size": 400,
        "segment_type": "large",
        "blocks": [
            {"address": 1000, "size": 100, "state": "inactive"},
            {"address": 1100, "size": 100, "state": "active_allocated"},
            {"size": 200, "state": "inactive"},
        ],
    }  # no address: it follows the block before it
    compact, numbers = segment_view([seg])
    assert [b["offset"] for b in compact[0]["blocks"]] == [0, 100, 200]
    assert numbers == {
        "largest_free_block_bytes": 200,
        "free_in_reserved_bytes": 300,
        "fragmentation_ratio": pytest.approx(1 - 200 / 300),
    }


# --- what the allocator itself reports (a fake torch stands in for CUDA) ---------------------------

ASYNC_REFUSAL = (
    "Calling snapshot with backend:cudaMallocAsync is not meaningful. (For backend:native, snapshot "
    "returns a detailed summary of all blocks tracked by the allocator, but the cudaMallocAsync "
    "backend does not track individual blocks.)"
)  # torch's CUDAMallocAsyncAllocator::snapshot


class FakeCuda:
    """The torch.cuda calls the allocator recorder makes, answering like torch 2.13 does on a GPU."""

    def __init__(self, backend, settings=None):
        self.backend, self.settings, self.history_calls = backend, settings, []
        self.memory = self

    def get_allocator_backend(self):
        return self.backend

    def _snapshot(self, device=None):
        if self.backend == "cudaMallocAsync":
            raise RuntimeError(ASYNC_REFUSAL)
        return {"segments": [], "device_traces": [[]], "allocator_settings": self.settings}

    def _record_memory_history(self, *args, **kwargs):
        self.history_calls.append(kwargs)

    def synchronize(self, device):
        pass

    def mem_get_info(self, device):
        return 70 * 2**30, 80 * 2**30

    def memory_stats(self, device):
        return {"segment.all.current": 1}

    def memory_allocated(self, device):
        return 3 * MIB

    memory_reserved = max_memory_allocated = memory_allocated


class FakeTorch:
    def __init__(self, cuda):
        import torch

        self.cuda, self.device = cuda, torch.device


GPU = Context(device="cuda:0", device_name="Fake GPU")


def test_cudamallocasync_runs_without_snapshots_and_says_why():
    from core.experiments.allocator import _Recorder
    from core.memory.steps import Workspace

    fake = FakeTorch(FakeCuda("cudaMallocAsync"))
    cfg = AllocatorConfig(alloc_conf="backend:cudaMallocAsync", history_entries=1000)
    recorder = _Recorder(fake, GPU, cfg)
    recorder.start_history()
    row = recorder.row(1, None, Workspace(fake, "cuda:0", lambda *a: None)).to_row()
    assert fake.cuda.history_calls == []  # no history: the backend keeps none
    assert row["allocated_bytes"] == 3 * MIB and row["driver_used_bytes"] == 10 * 2**30  # still measured
    assert row["segment_map"] is None and row["trace"] is None and row["fragmentation_ratio"] is None
    report = recorder.settings_report()
    assert report["allocator_backend"] == "cudaMallocAsync" and report["alloc_conf_not_applied"] == []
    assert "not meaningful" in report["snapshot_note"]


def test_a_setting_the_allocator_does_not_report_is_named():
    from core.experiments.allocator import _Recorder
    from core.memory.steps import Workspace

    reported = {
        "PYTORCH_CUDA_ALLOC_CONF": "",
        "max_split_size": -1,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
        "roundup_power2_divisions": {},
    }
    fake = FakeTorch(FakeCuda("native", reported))
    recorder = _Recorder(fake, GPU, AllocatorConfig(alloc_conf="expandable_segments:True"))
    recorder.row(1, None, Workspace(fake, "cuda:0", lambda *a: None))
    report = recorder.settings_report()
    assert report["allocator_settings_reported"] == reported
    assert report["alloc_conf_not_applied"] == [
        "expandable_segments: asked True, the allocator reports expandable_segments=False"
    ]


@pytest.mark.gpu
def test_gpu_cudamallocasync_run_finishes_without_segment_maps(manager):
    run_ = manager.submit(
        "allocator",
        {"scenario": "lifecycle", "size_mib": 64, "history_entries": 1000, "alloc_conf": "backend:cudaMallocAsync"},
        "cuda:0",
    ).wait(600)
    assert run_.status == "ok", run_.error
    assert run_.meta["allocator_backend"] == "cudaMallocAsync" and "not meaningful" in run_.meta["snapshot_note"]
    assert all(r["segment_map"] is None for r in run_.rows)
    assert run_.rows[1]["allocated_bytes"] >= 64 * MIB


@pytest.mark.gpu
def test_gpu_allocator_reports_the_setting_it_runs_with(manager):
    run_ = manager.submit(
        "allocator",
        {"scenario": "custom", "steps": ["alloc a 64", "free a"], "alloc_conf": "expandable_segments:True"},
        "cuda:0",
    ).wait(600)
    assert run_.status == "ok", run_.error
    assert run_.meta["allocator_backend"] == "native"
    assert run_.meta["allocator_settings_reported"]["expandable_segments"] is True
    assert run_.meta["alloc_conf_not_applied"] == []


def test_a_scenario_that_cannot_fit_is_refused_before_its_first_step():
    """Issue 15 finding 1: 1 TiB of tensors on this box is refused with the estimate, not attempted."""
    from core.errors import DoesNotFit

    cfg = AllocatorConfig(scenario="custom", steps=("alloc a 1048576",))
    with pytest.raises(DoesNotFit, match="needs an estimated 1.0 TiB"):
        drive_generator(run(cfg, Context("cpu", "CPU")))
