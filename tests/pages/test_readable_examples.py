"""AppTest: every page after every one-click example (a trace, a job's ranks, a snapshot on both memory pages, a hung
job's dumps, the lab's own H200 runs on Compare) and every page that needs none reads as text a person writes: no
table cell (st.dataframe draws cells on a canvas, so they are read here, not in the browser) and no figure says
``None``, ``nan``, a list's ``[[`` or a dict's ``{'``, or a Markdown backtick; a column of numbers is written in one
notation; the diagnosis carries no markup. Then what each example showed wrong once, said where it showed.

The browser pass over the same pages (text cut or drawn over other text): tests/e2e/test_screenshots.py."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from core.workload import examples
from tests.pages.waiting import until

REPR = re.compile(r"\bNone\b|\bnan\b|<NA>|\[\[|\{'|\{\"")
SCIENTIFIC = re.compile(r"^-?\d(\.\d+)?(e[+-]\d+|×10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")
IDS = {"rank", "step", "seq_id", "second", "size"}  # identifiers and sizes a person reads as written: 8192, 551
DECIMAL = re.compile(r"^-?[\d,]+\.\d+$")


def case(page: str, key: str, ready: str, name: str) -> pytest.param:
    return pytest.param(page, key, ready, id=f"{page.split('/')[-1][:-3]}-{name}")


CASES = (
    [
        case("pages/step_bench.py", f"step_bench.trace.example.{e.name}", "Straggler" if e.ranks else "Kernel time", e.name)
        for e in examples.of_kind("trace")
    ]
    + [
        case(page, f"{key}.snapshot.example.{e.name}", "Peak allocated", e.name)
        for e in examples.of_kind("snapshot")
        for page, key in (("pages/allocator.py", "allocator"), ("pages/train_memory.py", "training_memory"))
    ]
    + [case("pages/interconnect.py", f"interconnect.hang.example.{s.name}", "Stuck collective", s.name) for s in examples.of_kind("hang")]
    + [case("pages/compare.py", "compare.examples", "", "h200-runs")]
    + [case(page, "", "", "no-example") for page in ("pages/home.py", "pages/matmul.py", "pages/number_formats.py")]
)  # fmt: skip


def opened(app, page: str, key: str, ready: str):
    """The page, on the CPU, after one click on its example (and once the worker's import has ended)."""
    at = app.run()
    at.session_state["lab.device"] = "cpu"
    at.switch_page(page).run()
    if page.endswith("number_formats.py"):  # its answer comes from a worker as the page opens
        return until(at, lambda at: len(at.dataframe) >= 2, 300, what="the format tables")
    if key:
        at.button(key=key).click().run()
        if ready:
            return until(at, lambda at: any(m.label == ready for m in at.metric), 300, what=repr(ready))
        return until(at, lambda at: at.success or at.error, 300, what="word on the imports")
    return at


def unreadable(at) -> list[str]:
    """What no person should read on the page: a Python repr or a backtick in a table cell or a figure, a column of
    numbers in two notations, markup in the diagnosis."""
    found = []
    for i, frame in enumerate(at.dataframe):
        table: pd.DataFrame = frame.value
        for column in [table.index.name, *table.columns]:
            if column is not None and (REPR.search(str(column)) or "`" in str(column)):
                found.append(f"table {i}: column {column!r}")
        cells = table.reset_index() if table.index.name else table
        config = json.loads(frame.proto.columns or "{}")  # how the browser writes each column
        separated = {c: (config.get(str(c)) or {}).get("type_config", {}).get("format") for c in cells.columns}
        for column in cells.columns:
            values = cells[column].tolist()
            bad = [v for v in values if not isinstance(v, (list, dict, tuple)) and pd.isna(v)] + [
                v for v in values if REPR.search(str(v)) or "`" in str(v)
            ]
            if bad:
                found.append(
                    f"table {i} ({', '.join(map(str, cells.columns[:4]))}…): {column!r} reads {str(bad[0])[:80]!r}"
                )
            numbers = [abs(v) for v in values if isinstance(v, float) and v == v and v]
            if numbers and (max(numbers) >= 1e15 or min(numbers) < 1e-4):  # the browser would draw a 17-digit repr
                found.append(f"table {i}: {column!r} holds {max(numbers):.3g} … {min(numbers):.3g} unformatted")
            big = [abs(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
            if big and max(big) >= 1000 and column not in IDS and separated.get(column) != "localized":
                found.append(f"table {i}: {column!r} holds {max(big):.0f}, its thousands not separated")
            texts = [str(v) for v in values if isinstance(v, str)]
            if any(SCIENTIFIC.match(t) for t in texts) and any(DECIMAL.match(t) for t in texts):
                found.append(f"table {i}: {column!r} mixes notations: {texts[:4]}")
    for m in at.metric:
        said = f"{m.label} {m.value} {m.delta or ''}"
        if REPR.search(said) or "`" in said:
            found.append(f"metric {said!r}")
    for block in at.markdown:
        if block.value.startswith("**What stands out**") and "\\`" in block.value:
            found.append(f"a finding in backticks: {block.value[:200]!r}")
    for kind in ("caption", "info", "warning", "error", "success"):
        for element in getattr(at, kind):
            if REPR.search(str(element.value).replace("\\", "")):
                found.append(f"{kind}: {str(element.value)[:160]!r}")
    return found


@pytest.mark.parametrize("page, key, ready", CASES)
def test_every_page_after_every_example_reads_as_text_a_person_writes(app, page, key, ready):
    at = opened(app, page, key, ready)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]  # a run the page could not draw says so, in red
    assert not unreadable(at), unreadable(at)
    if check := CHECKS.get(key.rsplit(".", 1)[-1] if key else ""):
        check(at)


def python_frames_first(at) -> None:
    """The train-step snapshot was recorded with C++ frames (examples/README.md): at its peak 48 of them come before
    the first Python frame (18 once the recorder's and the allocator's own are hidden). The Python stack lists the
    Python frames of the peak's allocation, in the file's order, and nothing else; the C++ ones are folded below."""
    from tests.core.workload import snapshots

    example = examples.find("train-step-snapshot")
    raw = snapshots.load_any(str(examples.import_path(example)))
    peak = snapshots.plain_replay(raw, 0)["peak_index"]
    frames = raw["device_traces"][0][peak]["frames"]
    python = [f"{f['filename']}:{f['line']} {f['name']}" for f in frames if f["filename"].endswith(".py")]
    assert frames[0]["filename"] == "??" and python[0].endswith("optimizer.py:78 step")
    (stack,) = [e for e in at.expander if e.label == "Python stack at the peak"]
    assert stack.code[0].value.splitlines() == python
    (cpp,) = [e for e in at.expander if e.label.startswith("C++ frames at the peak")]
    folded = cpp.code[0].value.splitlines()  # the C++ frames but the recorder's and allocator's own (hidden)
    assert folded and not any(".py:" in line for line in folded) and f"({len(folded)} frames, " in cpp.label


def the_other_rank(at) -> None:
    """Two ranks: the straggler's margin is over the other rank (test_ranks.py: 271,973 against 210,320 µs)."""
    (most,) = [m for m in at.metric if m.label == "Most compute: rank 1"]
    assert most.value == "61.65 ms" and most.delta == "+29.3% over the other rank's"


def recorded_by_this_lab(at) -> None:
    """The shipped hangs were recorded by this lab: no line above them says 'recorded elsewhere'."""
    said = " ".join(str(e.value) for kind in ("caption", "info") for e in getattr(at, kind)).replace("\\", "")
    assert "recorded by this lab" in said and "recorded elsewhere" not in said


CHECKS = {
    "train-step-snapshot": python_frames_first,
    "recsys-a100-ranks": the_other_rank,
    "hang-skipped-rank": recorded_by_this_lab,
    "hang-desync-op": recorded_by_this_lab,
}


def test_the_check_sees_each_fault_on_a_hand_made_page(tmp_path):
    """The check itself: a None, a nan, a list's repr, a backtick, a 17-digit float, two notations in one column and
    3072871424 unseparated are each found in st.dataframe; the same table through the lab's show_table is clean."""
    from streamlit.testing.v1 import AppTest

    script = tmp_path / "page.py"
    script.write_text(
        "import pandas as pd\nimport streamlit as st\nfrom pages.common.tables import show_table\n"
        "bad = pd.DataFrame({'a': ['x', None], 'b': [1.5, float('nan')], 'c': ['[[4, 8]]', '`k`'],\n"
        "                    'd': [1.7976931348623157e308, 2.0], 'e': ['1.2e-05', '0.5'], 'f': [3072871424, 1]})\n"
        "st.dataframe(bad)\n"
        "show_table(pd.DataFrame({'f': [3072871424, 1], 'b': [1.5, float('nan')]}))\n"
    )
    at = AppTest.from_file(str(script)).run()
    found = unreadable(at)
    assert all(f.startswith("table 0") for f in found), found
    said = " ".join(found)
    for column in "abcdef":
        assert f"'{column}'" in said, (column, found)
