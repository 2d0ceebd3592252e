"""Rows told apart by their kind, read in one place (core.rows.kinds): the CLI's tables and the headline ask by name."""

from core.rows.kinds import of_kinds, other_kinds

# A step benchmark's rows as stored: samples, a summary between them, a kernel, and a row stored with no kind.
ROWS = [
    {"kind": "sample", "step": 0, "ms": 59.0},
    {"kind": "summary", "stack": "course", "step_ms_median": 59.0},
    {"kind": "sample", "step": 1, "ms": 60.0},
    {"kind": "kernel", "name": "sm90_xmma_gemm", "total_us": 812.5},
    {"step": 2, "ms": 61.0},
]


def test_the_rows_of_some_kinds_keep_their_stored_order():
    assert of_kinds(ROWS, ("kernel", "summary")) == [ROWS[1], ROWS[3]]
    assert of_kinds(ROWS, ("sample",)) == [ROWS[0], ROWS[2]]
    assert of_kinds(ROWS, ()) == []


def test_the_other_rows_include_those_without_a_kind():
    assert other_kinds(ROWS, ("summary", "kernel")) == [ROWS[0], ROWS[2], ROWS[4]]
