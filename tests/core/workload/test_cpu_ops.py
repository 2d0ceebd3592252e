"""The host's events as bounded columns: distinct names, shapes and stacks capped at the trace_names limit (past
it a name is lumped and counted, shapes and stacks are not kept), long names cut, ids of any JSON type read."""

import dataclasses
import json

import pytest

pytest.importorskip("msgspec")

from core.limits import LIMITS
from core.workload.trace import cpu_ops
from core.workload.trace.cpu_ops import OP, OVER_CAP, RUNTIME, SHAPES_OVER_CAP, STACKS_OVER_CAP
from core.workload.trace.file import read_trace


def op(i, name, **args):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": args}


def test_names_shapes_and_stacks_are_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_ops, "LIMITS", dataclasses.replace(LIMITS, trace_names=3))
    events = [op(i, f"aten::op{i}") for i in range(5)]  # 5 names, 3 kept
    events += [
        op(10 + i, "aten::mm", **{"Input Dims": [[i, 2], [2, 3]], "Input type": ["float", "float"]}) for i in range(5)
    ]
    events += [op(20 + i, "aten::add", **{"Call stack": f"a.py({i}): f"}) for i in range(5)]
    events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1, "args": {"device": 0, "stream": 7}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_trace(path)
    ops = t.ops
    assert ops.names == ["aten::op0", "aten::op1", "aten::op2", OVER_CAP]
    assert len(ops.start) == 15 and (ops.kind == OP).all()
    assert [ops.names[n] for n in ops.name[:5]] == ["aten::op0", "aten::op1", "aten::op2", OVER_CAP, OVER_CAP]
    # every later name is past the cap too; the mm shapes were not kept (their name is lumped, not aten::mm);
    # stacks do not depend on the name: 3 kept, 2 counted
    assert t.quirks[OVER_CAP] == 12 and len(ops.shapes) == 0 and SHAPES_OVER_CAP not in t.quirks
    assert ops.stacks == ["a.py(0): f", "a.py(1): f", "a.py(2): f"] and t.quirks[STACKS_OVER_CAP] == 2


def test_shapes_and_stacks_past_the_cap_are_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_ops, "LIMITS", dataclasses.replace(LIMITS, trace_names=4))
    events = [
        op(i, "aten::mm", **{"Input Dims": [[i + 1, 2], [2, 3]], "Input type": ["float", "float"]}) for i in range(6)
    ]
    events += [op(10 + i, "aten::mm", **{"Call stack": f"a.py({i}): f"}) for i in range(6)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_trace(path)
    assert len(t.ops.shapes) == 4 and t.quirks[SHAPES_OVER_CAP] == 2
    assert t.ops.shapes[0] == ("[[1, 2], [2, 3]]", '["float", "float"]', "")  # the JSON as written
    assert t.ops.shape.tolist()[:6] == [0, 1, 2, 3, -1, -1]
    assert len(t.ops.stacks) == 4 and t.quirks[STACKS_OVER_CAP] == 2 and t.ops.stacks[0] == "a.py(0): f"


def test_ids_of_any_json_type_and_long_names(tmp_path):
    long = "aten::" + "x" * (LIMITS.name_chars + 10)
    events = [
        op(0, long, **{"External id": "7"}),
        op(1, "aten::a", **{"External id": [1, 2]}),  # not an id: read as none, never refused
        op(2, "aten::b", **{"External id": 9.0, "Call stack": 5}),
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "tid": "12",
            "ts": 3,
            "dur": 1,
            "args": {"correlation": 4},
        },
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_trace(path)
    ops = t.ops
    assert ops.external.tolist() == [7, -1, 9, -1] and ops.correlation.tolist() == [-1, -1, -1, 4]
    assert ops.kind.tolist() == [OP, OP, OP, RUNTIME] and ops.tid.tolist() == [1, 1, 1, 12]
    assert ops.names[0].endswith(f"…({len(long):,} chars)") and ops.stack.tolist() == [-1, -1, -1, -1]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0", 0),
        ("42", 42),
        ("007", None),  # not JSON: a leading zero
        ("-3", -3),
        ('"12"', "12"),
        ("9.0", 9.0),
        ("1e3", 1000.0),
        ("[1, 2]", None),
        ("1" * 40, int("1" * 32)),  # an id is read from its first 32 bytes: out of int64 either way
    ],
)
def test_an_id_is_read_as_json_says_it(text, expected):
    """An id kept raw is its JSON value (a number, or a string of one), whether read at once or decoded."""
    import msgspec

    from core.workload.trace.file import _raw_number

    assert _raw_number(msgspec.Raw(text.encode())) == expected
