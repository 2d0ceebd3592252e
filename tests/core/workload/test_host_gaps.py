"""What the host did while the GPU idled: each cause of the gaps on real traces (tests/data/workload/README.md)
against a computation written here from the file's own events — plain JSON, a loop over each gap's stretches —
and the source line of an operator on a trace recorded here on the CPU."""

import json
from bisect import bisect_left
from decimal import Decimal

import pytest

pytest.importorskip("msgspec")

from core.workload.trace.file import read_trace
from core.workload.trace.host_gaps import CAUSES, _source, host_gap_findings, host_gaps, step_stall_findings
from core.workload.trace.timeline import analyse_trace
from tests.core.workload.traces import ALEXNET, BERT, EVENT_SYNC, GPU, RECSYS, STEP, trace_events

HOST = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}
SYNCS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "hipStreamSynchronize"}
SYNCS |= {"hipDeviceSynchronize", "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero"}


def reference(events, device, window=None):
    """The gaps of ``device``'s timeline by cause, in µs, computed from the events alone: the union of its
    activities, each gap's launching thread (the runtime call of the activity ending it), and in each stretch
    between two consecutive op boundaries inside the gap, the first cause (in CAUSES' order) of the ops covering
    it on that thread. ``window`` (start, end in the file's µs): only the gaps' parts inside it."""
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU and e["args"].get("device") == device]
    gpu.sort(key=lambda e: e["ts"])
    gaps, reach = [], None
    for e in gpu:
        if reach is not None and e["ts"] > reach:
            gaps.append((reach, e["ts"], e["args"].get("correlation")))
        reach = e["ts"] + e["dur"] if reach is None else max(reach, e["ts"] + e["dur"])
    host = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in HOST and not str(e.get("name")).startswith("ProfilerStep#")
    ]
    runtime = [e for e in host if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]]
    thread_of = {e["args"]["correlation"]: e["tid"] for e in runtime}
    counts = {}
    for e in gpu:
        if e["args"].get("correlation") in thread_of:
            tid = thread_of[e["args"]["correlation"]]
            counts[tid] = counts.get(tid, 0) + 1
    main = max(counts, key=lambda t: counts[t])
    # a device→host copy: its memcpy call, and the aten copy ops around such a call on its thread
    dtoh = {e["args"]["correlation"] for e in gpu if e["cat"] == "gpu_memcpy" and "DtoH" in e["name"]}
    copy_calls = [e for e in runtime if e["name"].startswith("cudaMemcpy") and e["args"]["correlation"] in dtoh]

    def cause(e):
        name = e["name"]
        if e in copy_calls:
            return 0
        if name in ("aten::copy_", "aten::_to_copy", "aten::to") and any(
            c["tid"] == e["tid"] and e["ts"] <= c["ts"] <= e["ts"] + e["dur"] for c in copy_calls
        ):
            return 0
        if name in SYNCS:
            return 1
        if name.startswith(("cudaMalloc", "cudaFree", "hipMalloc", "hipFree")) or name == "cudaHostAlloc":
            return 2
        if "DataLoader" in name and "__next__" in name:
            return 3
        if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
            return 4
        return 5

    by_thread = {}
    for e in host:
        by_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], cause(e)))
    for ops in by_thread.values():
        ops.sort()
    totals = [Decimal(0)] * len(CAUSES)
    for g0, g1, corr in gaps:
        tid = thread_of.get(corr, main)
        if window is not None:
            g0, g1 = max(g0, window[0]), min(g1, window[1])
            if g0 >= g1:
                continue
        ops = by_thread.get(tid, [])
        inside = [o for o in ops[: bisect_left(ops, (g1,))] if o[1] > g0]
        cuts = sorted({g0, g1} | {t for o in inside for t in o[:2] if g0 < t < g1})
        for a, b in zip(cuts, cuts[1:]):
            covering = [c for s, e, c in inside if s <= a and e >= b]
            totals[min(covering) if covering else 6] += b - a
    return {name: float(us) for name, us in zip(CAUSES, totals) if us}


def figures(path):
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    return trace, meta, host_gaps(trace, meta["device"])[0]


@pytest.mark.parametrize("path", [EVENT_SYNC, ALEXNET, STEP, RECSYS, BERT], ids=lambda p: p.name)
def test_every_cause_against_the_files_own_events(path):
    trace, meta, gaps = figures(path)
    got = {c["cause"]: c["time_us"] for c in gaps["causes"]}
    assert got == pytest.approx(reference(trace_events(path, exact=True), meta["device"]), abs=1e-6)
    assert gaps["gap_us"] == pytest.approx(meta["idle_us"], abs=1e-6)  # the gaps are the device's idle
    assert sum(got.values()) == pytest.approx(meta["idle_us"], abs=1e-6)


@pytest.mark.parametrize("path", [STEP, RECSYS], ids=lambda p: p.name)
def test_each_step_s_causes_against_the_files_own_events(path):
    """Each ProfilerStep's idle by the host's cause: the loop above on the gaps' parts inside the step's GPU
    window (its edges from the step row, in the file's µs); the steps' parts add up to no more than the whole."""
    trace = read_trace(path)
    tables, meta = analyse_trace(trace)
    steps = tables.steps
    whole, by_step = host_gaps(trace, meta["device"], steps=steps)
    events = trace_events(path, exact=True)
    assert steps and len(by_step) == len(steps) and all(list(held) == list(CAUSES) for held in by_step)
    for s, held in zip(steps, by_step):
        lo = Decimal(trace.origin_us) + Decimal(repr(s.gpu_window_start_us))
        want = reference(events, meta["device"], (lo, lo + Decimal(repr(s.gpu_window_us))))
        got = {name: us for name, us in held.items() if us}
        assert got == pytest.approx(want, abs=1e-6)
    assert sum(sum(held.values()) for held in by_step) <= whole["gap_us"] + 1e-6


def test_the_causes_of_a_cpu_stepped_trace_are_each_step_s_idle():
    # the recsys rank's steps are CPU spans: each GPU window runs from the step's first activity to the next
    # step's first, so its idle is all inside gaps, and its causes add up to it (two ways of counting idle)
    trace = read_trace(RECSYS)
    tables, meta = analyse_trace(trace)
    _, by_step = host_gaps(trace, meta["device"], steps=tables.steps)
    assert len(tables.steps) == 2
    for s, held in zip(tables.steps, by_step):
        assert sum(held.values()) == pytest.approx(s.idle_us, abs=1e-6)


def stall_trace() -> dict:
    """Four CPU steps of 100 µs on thread 1 ([100n, 100n + 100), n = 1…4), each launching one kernel at 100n + 5
    (a 2 µs call) that runs [100n + 10, 100n + 20]; in step 3 the DataLoader's ``__next__`` runs [320, 400].
    GPU windows (first activity to the next step's first): [110, 210), [210, 310), [310, 410), [410, 420);
    gaps [120, 210), [220, 310), [320, 410): steps 1 and 2 hold the next launch call (other CPU work 2, no CPU
    event 88); step 3: data loading 80 ([320, 400]), no CPU event 5, the launch 2 ([405, 407]), none 3."""
    events = []
    for n in range(1, 5):
        t = 100 * n
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": t,
             "dur": 100},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5,
             "dur": 2, "args": {"correlation": n}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 10, "dur": 10,
             "args": {"device": 0, "stream": 7, "correlation": n}},
        ]  # fmt: skip
    events.append(
        {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         "pid": 1, "tid": 1, "ts": 320, "dur": 80}
    )  # fmt: skip
    return {"traceEvents": events}


def test_one_step_stalling_on_data_loading_by_hand(tmp_path):
    path = tmp_path / "stall.json"
    path.write_text(json.dumps(stall_trace()))
    trace = read_trace(path)
    tables, meta = analyse_trace(trace)
    _, by_step = host_gaps(trace, meta["device"], steps=tables.steps)
    steps = [s.adding(window_causes=held) for s, held in zip(tables.steps, by_step)]
    held = {s.step: {name: us for name, us in s.window_causes.items() if us} for s in steps}
    assert held == {
        1: {"other CPU work": 2.0, "no CPU event": 88.0},
        2: {"other CPU work": 2.0, "no CPU event": 88.0},
        3: {"data loading": 80.0, "other CPU work": 2.0, "no CPU event": 8.0},
        4: {},
    }
    (found,) = step_stall_findings(steps)
    assert found.value == pytest.approx(80.0)  # 80 µs of step 3's 100 µs window
    assert found.text.startswith("step 3 stalls on data loading: the GPU idled 80.0 µs of its 100.0 µs window (80.0%)")
    assert "against none in the median step of 4" in found.text
    # the import says it among its findings
    from core.experiment import config_from_dict, drive
    from core.experiments.profiler_trace import ProfilerTraceConfig, run

    out, _ = drive(run(config_from_dict(ProfilerTraceConfig, {"path": str(path)}), None))  # type: ignore[arg-type]
    assert [f["text"] for f in out.meta["findings"] if f["kind"] == "step_stall"] == [found.text]
    # the same time in every step is the steady state, not a stall
    steady = [s.adding(window_causes={"data loading": 80.0}) for s in steps]
    assert step_stall_findings(steady) == []


def test_a_blocking_host_to_device_copy_is_synchronisation(tmp_path):
    """HIP's ``hipMemcpyWithStream`` is "akin to hipMemcpyAsync + hipStreamSynchronize" (HIP's API reference): SGLang's
    prefill on an MI300X held the thread 493 ms in one, copying 15 ints host to device inside ``aten::copy_``
    (TraceLens' ``sglang_Qwen3-8B_prefilldecode.json.gz``), and it read "other CPU work". By hand: kernels [0, 10]
    and [600, 610]; between them ``aten::copy_`` [20, 540] around ``hipMemcpyWithStream`` [25, 530] (its HtoD copy
    [526, 527]), the launch [590, 592]. Gaps [10, 526] and [527, 600]: 589; synchronisation 504 ([25, 526] and
    [527, 530]); other CPU work 17 ([20, 25], [530, 540], the launch); no CPU event the other 68."""
    ev = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 10,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 20, "dur": 520},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": 1, "tid": 1, "ts": 25, "dur": 505,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Host -> Device)", "pid": 0, "tid": 7, "ts": 526,
         "dur": 1, "args": {"device": 0, "stream": 7, "correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 590, "dur": 2,
         "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 600, "dur": 10,
         "args": {"device": 0, "stream": 7, "correlation": 3}},
    ]  # fmt: skip
    path = tmp_path / "h2d.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    summary, _ = host_gaps(trace, meta["device"])
    held = {c["cause"]: c["time_us"] for c in summary["causes"]}
    assert summary["gap_us"] == 516.0 + 73.0 and held["synchronisation"] == 501.0 + 3.0
    assert held["other CPU work"] == 5.0 + 10.0 + 2.0 and held["no CPU event"] == 68.0
    assert summary["causes"][0]["top_ops"][0]["op"] == "hipMemcpyWithStream"


def test_an_item_call_on_a_real_a100_trace_by_hand():
    # hta_a100_event_sync: `if x.sum() > 0` (aten::is_nonzero → item → _local_scalar_dense: a DtoH cudaMemcpyAsync
    # then cudaStreamSynchronize), then event and device synchronisation. By hand, µs after the first event:
    # activities [2810,2811] [2859,2870] [2900,2901] [2935,2937] (the DtoH copy) [3037,3073]; gaps [2811,2859] 48,
    # [2870,2900] 30, [2901,2935] 34, [2937,3037] 100 = 212, all launched by thread 948300, which runs:
    # gap 1: ones/fill_ to 2815 (other 4), nothing to 2824 (none 9), sum from 2824 (other 35);
    # gap 2: aten::gt throughout (other 30);
    # gap 3: gt to 2903 (other 2), nothing to 2910 (none 7), is_nonzero/item (sync 7), cudaMemcpyAsync DtoH from 2917
    #        (copy 18);
    # gap 4: the memcpy to 2946 (copy 9), _local_scalar_dense to 2947, cudaStreamSynchronize to 2953, item to 2957
    #        (sync 1 + 6 + 4), nothing to 3017 (none 60), cudaEventRecord (other 3), none 7, cudaLaunchKernel
    #        [3027,3036] (other 9), none 1.
    # other 4+35+30+2+3+9 = 83; none 9+7+60+7+1 = 84; copy 18+9 = 27; synchronisation 7+1+6+4 = 18.
    _, meta, gaps = figures(EVENT_SYNC)
    got = {c["cause"]: c["time_us"] for c in gaps["causes"]}
    assert got == {"no CPU event": 84.0, "other CPU work": 83.0, "device→host copy": 27.0, "synchronisation": 18.0}
    copy = next(c for c in gaps["causes"] if c["cause"] == "device→host copy")
    assert copy["top_ops"][0]["op"] == "cudaMemcpyAsync (DtoH, pageable)"
    sync = next(c for c in gaps["causes"] if c["cause"] == "synchronisation")
    assert {o["op"] for o in sync["top_ops"]} >= {"aten::item", "cudaStreamSynchronize"}


def test_findings_name_the_operator():
    trace, meta, gaps = figures(ALEXNET)
    meta["host_gaps"] = gaps
    found = host_gap_findings(meta)
    top = gaps["causes"][0]
    assert top["cause"] == "allocator" and top["top_ops"][0]["op"] == "cudaFree"
    assert " cudaFree" in found[0].text and "allocator" in found[0].text
    assert found[0].value == pytest.approx(100 * top["time_us"] / meta["span_us"])


def test_the_source_line_of_an_operator_from_a_cpu_recording(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.data import DataLoader

    path = tmp_path / "cpu.json"
    loader = DataLoader(list(range(8)), batch_size=4)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for batch in loader:  # the line the DataLoader's __next__ is called from
            torch.as_tensor(batch).sum()
    prof.export_chrome_trace(str(path))
    line = next(i for i, text in enumerate(open(__file__), 1) if "the line the DataLoader's __next__" in text)
    trace = read_trace(path)
    ops = trace.ops
    named = [i for i in range(len(ops.name)) if ops.names[ops.name[i]].startswith("enumerate(DataLoader)")]
    assert named, "the recording has the DataLoader's annotation"
    where, _, function = _source(trace, named[0]).partition(" ")
    file, _, at = where.rpartition(":")
    assert function == "test_the_source_line_of_an_operator_from_a_cpu_recording"
    assert __file__.endswith(file) and file.endswith("tests/core/workload/test_host_gaps.py")
    # the profiler's Python tracer writes the frame's line as it stood at the call: the loop, or the `with` above it
    assert int(at) in (line - 1, line)


def test_the_source_line_on_a_real_trace_with_stacks():
    # BERT on an H100, recorded with_stack: the `.item()` that synchronises is transformers' attention-mask check;
    # its line is the innermost python_function around the operator outside torch (found here by a loop)
    trace, meta, gaps = figures(BERT)
    sync = next(c for c in gaps["causes"] if c["cause"] == "synchronisation")
    top = sync["top_ops"][0]
    events = trace_events(BERT, exact=True)
    op = max(
        (e for e in events if e.get("cat") == "cpu_op" and e["name"] == top["op"]),
        key=lambda e: e["dur"],
    )
    frames = [
        e
        for e in events
        if e.get("cat") == "python_function"
        and e["tid"] == op["tid"]
        and e["ts"] <= op["ts"]
        and op["ts"] + op["dur"] <= e["ts"] + e["dur"]
        and ".py(" in e["name"]
        and not e["name"].startswith(("torch/", "<"))
    ]
    inner = max(frames, key=lambda e: e["ts"])
    path, _, rest = inner["name"].partition("(")
    line, _, function = rest.partition("): ")
    assert (
        top["source"]
        == f"{path}:{line} {function}"
        == ("transformers/modeling_attn_mask_utils.py:429 _prepare_4d_attention_mask_for_sdpa")
    )
