"""Kernels → operators → modules on real traces (tests/data/workload/README.md), against an attribution written
here from the file's own JSON events: each activity's launch call by correlation id, the innermost CPU operator on
the call's thread holding the call's start (a loop over the operators), the innermost module annotation or
``nn.Module`` event around it, else the backward node it runs under."""

import json

import pytest

pytest.importorskip("msgspec")

from core.measure.kernels import classify_kernel
from core.rows.trace_breakdown import TraceBreakdown
from core.workload.trace.file import read_trace
from core.workload.trace.ops import NO_MODULE, NO_OP, TINY_US, op_breakdown, op_findings
from core.workload.trace.text import op_lines
from core.workload.trace.timeline import analyse_trace
from tests.core.workload.traces import GPU, RECSYS, STEP, trace_events


def reference(path, device):
    """{(op, module): [GPU µs, kernels, copies, memsets]} from the file's events alone."""
    events = trace_events(path)
    runtime = {
        e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]
    }
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    around = [
        e
        for e in events
        if (e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#"))
        or (e.get("cat") == "python_function" and e["name"].startswith("nn.Module: "))
    ]

    order = {id(e): i for i, e in enumerate(events)}

    def innermost(candidates, tid, t):
        """The latest-starting, then shortest, then last in the file (Kineto writes a caller before its callee)."""
        holding = [e for e in candidates if e["tid"] == tid and e["ts"] <= t <= e["ts"] + e["dur"]]
        return max(holding, key=lambda e: (e["ts"], -e["dur"], order[id(e)]), default=None)

    out = {}
    for e in events:
        if e.get("cat") not in GPU or e["args"].get("device") != device:
            continue
        call = runtime.get(e["args"].get("correlation"))
        op = innermost(ops, call["tid"], call["ts"]) if call else None
        module = NO_MODULE
        if op is not None:
            m = innermost(
                [x for x in around if x["ts"] <= op["ts"] and op["ts"] + op["dur"] <= x["ts"] + x["dur"]],
                op["tid"],
                op["ts"],
            )
            if m is not None:
                module = m["name"]
            else:
                holding = [x for x in ops if x["tid"] == op["tid"] and x["ts"] <= op["ts"] <= x["ts"] + x["dur"]]
                outer = min(holding, key=lambda x: (x["ts"], -x["dur"], order[id(x)]))
                if outer["name"].startswith("autograd::engine::evaluate_function: "):
                    module = outer["name"]
        row = out.setdefault((op["name"] if op else NO_OP, module), [0.0, 0, 0, 0])
        row[0] += e["dur"]
        row[1 + ["kernel", "gpu_memcpy", "gpu_memset"].index(e["cat"])] += 1
    return out


@pytest.mark.parametrize("path", [RECSYS, STEP], ids=lambda p: p.name)
def test_operators_and_modules_against_the_files_own_events(path):
    trace = read_trace(path)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"], top=10_000)
    want = reference(path, meta["device"])
    counts = ("gpu_time_us", "kernels", "copies", "memsets")
    assert {(r["op"], r["module"]): [r[k] for k in counts] for r in got["ops"]} == pytest.approx(want)
    assert got["ops_gpu_time_us"] == pytest.approx(sum(row[0] for row in want.values()))
    modules: dict[str, list] = {}
    for (_, module), row in want.items():
        modules[module] = [a + b for a, b in zip(modules.get(module, [0.0, 0, 0, 0]), row)]
    assert {r["module"]: [r[k] for k in counts] for r in got["modules"]} == pytest.approx(modules)
    assert any(r["copies"] for r in got["ops"]) and any(r["memsets"] for r in got["ops"])


def test_an_operator_that_launched_only_copies_says_so():
    """The V100 step's ``aten::copy_`` in ``## load_batch ##`` put copies on the GPU and no kernel: its line says
    how many (it read "×0"); one that launched all three kinds names each."""
    trace = read_trace(STEP)
    _, meta = analyse_trace(trace)
    want = reference(STEP, meta["device"])
    meta |= op_breakdown(trace, meta["device"])
    _, kernels, copies, memsets = want[("aten::copy_", "## load_batch ##")]
    assert kernels == memsets == 0 and copies > 0
    lines = op_lines(TraceBreakdown.from_meta(meta), meta)
    assert any(line.endswith(f"  {copies} copies{' ' * (24 - len(f'{copies} copies'))} aten::copy_ [## load_batch ##]")
               for line in lines)  # fmt: skip
    _, kernels, copies, memsets = want[("CompiledFunctionBackward", "autograd::engine::evaluate_function: "
                                         "CompiledFunctionBackward")]  # fmt: skip
    assert f"  {kernels} kernels, {copies} copy, {memsets} memsets " in "\n".join(lines) and copies == 1


def test_the_recsys_ranks_top_operators_and_its_unfused_attention():
    trace = read_trace(RECSYS)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"])
    want = reference(RECSYS, meta["device"])
    top = max(want.items(), key=lambda kv: kv[1][0])
    assert (
        (got["ops"][0]["op"], got["ops"][0]["module"]) == top[0] == ("record_param_comms", "## alltoall_fwd_single ##")
    )
    # softmax and bmm in one module: DistributedDataParallel.forward runs aten::_softmax and aten::bmm
    (attention,) = [p for p in got["op_patterns"] if p["pattern"] == "unfused attention"]
    module = "DistributedDataParallel.forward"
    assert attention["module"] == module and attention["ops"] == ["aten::_softmax", "aten::bmm"]
    assert attention["time_us"] == sum(
        row[0] for (op, m), row in want.items() if m == module and op in ("aten::_softmax", "aten::bmm")
    )


def test_many_tiny_elementwise_kernels_counted_from_the_file():
    trace = read_trace(STEP)
    _, meta = analyse_trace(trace)
    got = op_breakdown(trace, meta["device"])
    events = [e for e in trace_events(STEP) if e.get("cat") == "kernel"]
    kernels = [e for e in events if e["args"].get("device") == meta["device"]]
    tiny = [e for e in kernels if e["dur"] < TINY_US and classify_kernel(e["name"])[0] == "elementwise"]
    (pattern,) = [p for p in got["op_patterns"] if p["pattern"] == "many tiny elementwise kernels"]
    assert (pattern["kernels"], pattern["of_kernels"]) == (len(tiny), len(kernels)) == (289, 1007)
    assert pattern["time_us"] == sum(e["dur"] for e in tiny)


def test_tiny_kernels_under_no_operator_are_not_said_to_come_from_one():
    """A trace with no host events (an MI210's GPU-only trace): the finding names no placeholder as their source."""
    pattern = {"pattern": "many tiny elementwise kernels", "time_us": 1274.0, "kernels": 286, "of_kernels": 562}
    pattern |= {"below_us": 10.0, "ops": [{"op": NO_OP, "kernels": 286}], "advice": "fuse them"}
    (finding,) = op_findings({"span_us": 6000.0, "op_patterns": [pattern]})
    assert "no CPU operator recorded around them" in finding.text and "most from" not in finding.text
    pattern["ops"] = [{"op": NO_OP, "kernels": 200}, {"op": "aten::add_", "kernels": 86}]
    assert "most from aten::add_ ×86)" in op_findings({"span_us": 6000.0, "op_patterns": [pattern]})[0].text


def test_a_trace_without_host_events_counts_every_activity_under_no_operator(tmp_path):
    # two kernels of 2 µs and nothing else: 4 µs, none of it traced to an operator
    kernels = [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": t, "dur": 2, "args": {"device": 0, "stream": 7}}
        for t in (1, 10)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": kernels}))
    got = op_breakdown(read_trace(path), 0)
    assert [(r["op"], r["module"], r["gpu_time_us"], r["kernels"], r["calls"]) for r in got["ops"]] == [
        (NO_OP, NO_MODULE, 4.0, 2, 0)
    ]
    assert got["ops_attributed_share"] == 0.0 and got["op_patterns"] == []
