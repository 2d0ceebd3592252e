"""The hang section of the Interconnect page: import a hung job's flight-recorder dumps (parsed in a worker,
``flight-recorder``) or open a shipped set with one click, and show the diagnosis first, then the ranks ×
collectives grid and each rank's last collectives. This module places widgets; the numbers come from the engine.
"""

from __future__ import annotations

import streamlit as st

from core.result import RunResult
from core.rows.flight_recorder import HangSummary
from core.workload import examples
from pages.common import imports, run_panel
from pages.common.charts import show_charts
from pages.common.facts import fact
from pages.common.import_notes import findings, quirks
from pages.common.markdown import markdown_text
from pages.common.tables import show_table
from render.plots import flight_recorder as plots

EXPERIMENT = "flight-recorder"
RANK_COLUMNS = ["rank", "state", "last_completed_seq", "last_entered_seq", "last_op", "wrapped", "file"]


def section(key: str) -> None:
    st.subheader("When the job hangs: the flight recorder")
    st.write(
        "Every rank's flight-recorder dump of a job that hung (`python -m core record --flight-recorder DIR -- "
        "torchrun …` makes them land in one folder): which collective stopped the job, which rank never entered "
        "it or entered another, and where in the code."
    )
    imports.importer(key, EXPERIMENT, "Flight-recorder dumps", "one file per rank, pickle or JSON", ranks=EXPERIMENT)
    _examples(key)
    imports.reopen(key, EXPERIMENT)
    run_panel.results(key, render, empty="No dumps imported yet: upload a job's dumps, or open an example above.")


def _examples(key: str) -> None:
    here = [e for e in examples.of_kind("hang") if examples.present(e)]
    for s in here:
        if st.button(f"Open an example hang: {markdown_text(s.title)}", key=f"{key}.example.{s.name}"):
            run_panel.submit(key, EXPERIMENT, {"example": s.name}, device="cpu", name=f"example {s.name}")


def render(run: RunResult) -> None:
    m = HangSummary.from_run(run)
    if m.example:
        st.info(f"{markdown_text(m.example.title)}: {markdown_text(m.example.label)}", icon=":material/science:")
    findings(run.meta)
    quirks(run.meta)
    s = m.stuck
    cols = st.columns(4)
    fact(cols[0], "Ranks read", len(m.ranks), f"of world size {m.world_size or 'not recorded'}")
    # the sequence number is the figure (a quarter of the page holds "#4", where "all_reduce #4" lost its "#4")
    fact(cols[1], "Stuck collective", f"#{s.seq_id}" if s else "none", f"{s.op} of group {s.group}" if s else None)
    cols[2].metric("Ranks that stopped it", len(s.culprits) if s else 0)
    cols[3].metric("Ranks waiting", len(s.ranks_waiting) if s else 0)
    st.caption(
        f"{markdown_text(m.file)} · recorder version {markdown_text(m.version)} · "
        f"{markdown_text(m.backend or 'backend not recorded')}"
    )
    show_charts(plots.figures(run), f"hang.{run.id}")
    table = run.frame()
    if not table.empty:
        show_table(table.loc[:, [c for c in RANK_COLUMNS if c in table]], hide_index=True)
