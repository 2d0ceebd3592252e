"""The Interconnect page runs Gloo ranks on CPU and draws the bandwidth charts (the charts themselves:
tests/render/plots/test_interconnect.py)."""

import pytest

from tests.pages.waiting import chart, error, until

pytest.importorskip("plotly")


PAGE = "pages/interconnect.py"


def test_page_runs_gloo_ranks_on_cpu_and_draws_the_charts(app):
    at = app.run()
    at = at.switch_page(PAGE).run()
    assert not at.exception
    assert any("Gloo" in i.value for i in at.info)  # a CPU box says what it will do
    assert any("torchrun --nnodes 2" in c.value for c in at.code)  # the multi-box command
    at.multiselect(key="interconnect.collectives").set_value(["all_reduce", "broadcast"])
    at.multiselect(key="interconnect.sizes").set_value([2**16, 2**20])
    at.number_input(key="interconnect.warm").set_value(5.0)
    at.number_input(key="interconnect.rep").set_value(20.0)
    at.number_input(key="interconnect.minr").set_value(3)
    at.run()
    at.button(key="interconnect.button").click().run()
    until(at, lambda at: chart(at) or error(at), 240)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Collective bandwidth vs message size" in t for t in titles)
    assert any("Time per call" in t for t in titles)
    table = at.dataframe[0].value
    assert sorted(set(zip(table["collective"], table["bytes"]))) == [
        ("all_reduce", 65536),
        ("all_reduce", 1048576),
        ("broadcast", 65536),
        ("broadcast", 1048576),
    ]
    assert set(table["check"]) == {"ok"}
    warning = " ".join(w.value for w in at.warning)
    assert "unsupported on" in warning and "peer matrix" in warning  # no GPU: said, not skipped
    assert "nan" not in warning and "all_reduce" not in warning  # only the points not measured are listed
    assert any(m.label == "all_reduce" for m in at.metric)  # the unit in the line under it: a long label was cut
    assert any(c.value.startswith("GB/s bus bandwidth at ") for c in at.caption)
