"""The Interconnect page runs Gloo ranks on CPU and draws the bandwidth charts; figure builders checked by hand."""

import time

import pytest

pytest.importorskip("plotly")

from core.result import RunResult
from render.plots.interconnect import figures

PAGE = "pages/interconnect.py"


def _run(rows, meta=None, device=None):
    return RunResult(
        experiment="interconnect",
        config={},
        device=device or {"kind": "cpu", "name": "Test CPU"},
        versions={},
        started_at="2026-11-22T00:00:00+00:00",
        finished_at=None,
        status="ok",
        rows=rows,
        meta={"backend": "gloo", "world_size": 2, "nodes": 1} | (meta or {}),
    )


def _collective(name, nbytes, ms, factor):
    gbs = nbytes / (ms * 1e-3) / 1e9
    return {
        "kind": "collective",
        "collective": name,
        "bytes": nbytes,
        "size": f"{nbytes} B",
        "status": "ok",
        "median_ms": ms,
        "p20_ms": ms * 0.9,
        "p80_ms": ms * 1.2,
        "reps": 10,
        "slowest_rank": 1,
        "algbw_gbs": gbs,
        "busbw_gbs": gbs * factor,
        "busbw_factor": factor,
        "algbw_gbs_p20": gbs / 1.2,
        "algbw_gbs_p80": gbs / 0.9,
        "busbw_gbs_p20": gbs * factor / 1.2,
        "busbw_gbs_p80": gbs * factor / 0.9,
    }


def test_bandwidth_and_time_charts_are_log_log_with_busbw_lines():
    rows = [_collective("all_reduce", b, ms, 1.0) for b, ms in ((2**20, 1.0), (2**24, 10.0))]
    rows += [
        _collective("broadcast", 2**20, 0.5, 1.0),
        {
            "kind": "collective",
            "collective": "all_to_all",
            "bytes": 2**20,
            "status": "unsupported",
            "reason": "unsupported on gloo: nope",
        },
    ]
    charts = figures(_run(rows))
    assert [c.name for c in charts] == ["interconnect-bandwidth", "interconnect-time"]
    bw = charts[0].figure
    assert bw.layout.xaxis.type == "log" and bw.layout.yaxis.type == "log"
    traces = {t.name: t for t in bw.data}
    assert set(traces) == {"all_reduce busbw", "all_reduce algbw", "broadcast busbw", "broadcast algbw"}
    assert list(traces["all_reduce busbw"].y) == pytest.approx([2**20 / 1e-3 / 1e9, 2**24 / 1e-2 / 1e9])
    assert "all_to_all busbw" not in traces  # an unsupported point is not drawn as a zero
    assert "CPU" in bw.layout.title.text and "GB/s" in bw.layout.yaxis.title.text
    assert list(bw.layout.xaxis.ticktext) == ["1 MiB", "16 MiB"]
    time_traces = {t.name: list(t.y) for t in charts[1].figure.data}
    assert time_traces["all_reduce"] == pytest.approx([1000.0, 10000.0])  # µs
    assert "µs" in charts[1].figure.layout.yaxis.title.text


def test_peer_matrix_heatmap_and_host_copy_bars():
    peers = [
        {
            "kind": "peer",
            "src": s,
            "dst": d,
            "peer_access": None if s == d else (s + d) % 2 == 1,
            "bytes": 2**28,
            "status": "ok",
            "gbs": 100.0 * (s + 1) + d,
        }
        for s in range(2)
        for d in range(2)
    ]
    copies = [
        {
            "kind": "host_copy",
            "gpu": 0,
            "direction": d,
            "memory": m,
            "bytes": 2**28,
            "status": "ok",
            "gbs": g,
            "gbs_p20": g - 1,
            "gbs_p80": g + 1,
        }
        for d, m, g in (
            ("h2d", "pinned", 25.0),
            ("h2d", "pageable", 10.0),
            ("d2h", "pinned", 26.0),
            ("d2h", "pageable", 9.0),
        )
    ]
    run = _run(peers + copies, device={"kind": "cuda", "name": "Fake GPU", "label": "cuda:0 — Fake GPU"})
    charts = {c.name: c for c in figures(run)}
    heat = charts["interconnect-peer-matrix"].figure.data[0]
    assert [list(r) for r in heat.z] == [[100.0, 101.0], [200.0, 201.0]]  # rows: source, columns: destination
    assert heat.text[0][1].endswith("P2P") and heat.text[0][0].endswith("local")
    bars = {t.name: list(t.y) for t in charts["interconnect-host-copies"].figure.data}
    assert bars == {"pinned": [25.0, 26.0], "pageable": [10.0, 9.0]}


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
    deadline = time.monotonic() + 240
    while not at.get("plotly_chart") and not at.error and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
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
    assert any(m.label == "all_reduce busbw (GB/s)" for m in at.metric)


def test_overlay_puts_runs_side_by_side():
    from render.plots.interconnect import overlay

    a = _run([_collective("all_reduce", 2**20, 1.0, 1.0)])
    b = _run([_collective("all_reduce", 2**20, 0.5, 1.5)], meta={"world_size": 4})
    (chart,) = overlay([a, b])
    assert [list(t.y) for t in chart.figure.data] == [
        [pytest.approx(2**20 / 1e-3 / 1e9)],
        [pytest.approx(2**20 / 0.5e-3 / 1e9 * 1.5)],
    ]
    assert "4 ranks" in chart.figure.data[1].name
