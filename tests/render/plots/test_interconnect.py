"""The interconnect charts on hand-made rows: log-log bandwidth and time with busbw lines, the peer matrix, the
host copies, runs side by side (bandwidths worked out by hand from bytes and times)."""

import pytest

pytest.importorskip("plotly")

from render.plots.interconnect import figures, overlay
from tests.factories import make_run


def _run(rows, meta=None, device=None):
    return make_run("interconnect", rows, {"backend": "gloo", "world_size": 2, "nodes": 1} | (meta or {}), device)


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


def test_overlay_puts_runs_side_by_side():
    a = _run([_collective("all_reduce", 2**20, 1.0, 1.0)])
    b = _run([_collective("all_reduce", 2**20, 0.5, 1.5)], meta={"world_size": 4})
    (chart,) = overlay([a, b])
    assert [list(t.y) for t in chart.figure.data] == [
        [pytest.approx(2**20 / 1e-3 / 1e9)],
        [pytest.approx(2**20 / 0.5e-3 / 1e9 * 1.5)],
    ]
    assert "4 ranks" in chart.figure.data[1].name
