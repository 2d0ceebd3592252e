"""What an imported run says above its charts: where a file recorded elsewhere comes from, what stands out
(the engine's findings, derived once at import), and what was odd in the file. Meta is read defensively:
an imported runs file may carry any."""

from __future__ import annotations

import streamlit as st

from core.result import RunResult
from core.rows.notes import RunNotes
from core.rows.provenance import Provenance
from core.workload.findings import stored_findings
from pages.common.markdown import markdown_text


def provenance(run: RunResult) -> None:
    """Where a file recorded elsewhere comes from; nothing for the user's own file."""
    example = Provenance.from_run(run).example
    if example is None:
        return

    def said(value: str) -> str:
        return markdown_text(value or "not recorded")

    one_rank = f" The set's {len(example.ranks)} rank files, side by side." if example.ranks else ""
    notes = f"; {said(example.notes)}." if example.notes else "."
    st.info(
        f"**Recorded elsewhere**, on {said(example.gpu)}, by others: {said(example.title)}. Source: "
        f"{said(example.repository)}, {said(example.source_path)} at commit {markdown_text(example.commit[:12])} "
        f"({said(example.licence)}){notes}{one_rank}",
        icon=":material/public:",
    )


def findings(meta: dict) -> None:
    """The diagnosis first: the import's findings, each with its number."""
    if found := stored_findings(meta):
        st.markdown(
            "**What stands out**\n\n" + "\n".join(f"{i}. {markdown_text(f.text)}" for i, f in enumerate(found, 1))
        )


def quirks(meta: dict) -> None:
    """What the reader found odd in the file, with counts: never silent, out of the way when there is none."""
    if found := RunNotes.from_meta(meta).quirks:
        with st.expander(f"What was odd in this file ({len(found)} kind{'s' if len(found) > 1 else ''})"):
            st.markdown("\n".join(f"- {count:,} × {markdown_text(why)}" for why, count in found.items()))
