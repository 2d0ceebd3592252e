"""AppTest: the Interconnect page's hang section opens a shipped set of flight-recorder dumps with one click (a
worker reads them) and shows the diagnosis first, the stuck collective and the ranks × collectives grid."""

from __future__ import annotations

from render.plots.flight_recorder import grid_table
from tests.pages.test_workload import page
from tests.pages.waiting import metric, until


def test_one_click_opens_the_skipped_rank_example_and_names_rank_3(data_dir):
    at = page("pages/interconnect.py")
    at.button(key="interconnect.hang.example.hang-skipped-rank").click().run()
    until(at, metric("Stuck collective"), 120)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stuck collective"] == "#4" and metrics["Ranks waiting"] == "3"  # "all_reduce #4" was cut to
    assert any(c.value == "all_reduce of group 0" for c in at.caption)  # "all_reduce…" at 1280 px: the op under it
    assert metrics["Ranks that stopped it"] == "1"
    text = " ".join(m.value for m in at.markdown).replace("\\", "")  # user text is escaped for Markdown
    assert "1. rank 3 never entered all_reduce #4 of the default group" in text
    charts = at.get("plotly_chart")
    assert any("Collectives of group" in c.proto.spec for c in charts)
    run = at.session_state["interconnect.hang.run"]
    table = grid_table(run)
    assert set(table.loc[table["seq_id"] == 4, "state"]) == {"waiting", "missing"}
    assert table.loc[(table["rank"] == 3) & (table["seq_id"] == 4), "state"].item() == "missing"
