"""Allocator page on the CPU (pinned in the sidebar): loads, says what needs a GPU, runs the lifecycle, composes custom steps."""

import time

import pytest

PAGE = "pages/allocator.py"


def _open(app):
    at = app.run()
    return at.switch_page(PAGE).run()


def _wait_for_result(at, deadline_s=180):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        at.run()
        if any("Run `" in c.value for c in at.caption):  # the status banner of a finished run
            return at
        time.sleep(0.5)
    raise AssertionError("the run did not finish in time")


def test_page_loads_on_cpu_and_explains_the_gpu_only_parts(cpu_app):
    at = _open(cpu_app)
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "no caching allocator" in text and "segment map" in text and "backward-peak" in text
    assert at.selectbox(key="allocator.scenario").options == ["lifecycle", "custom"]


def test_page_runs_the_cpu_lifecycle(cpu_app):
    at = _open(cpu_app)
    at.number_input(key="allocator.size").set_value(48).run()
    at.button(key="allocator.button").click().run()
    _wait_for_result(at)
    assert not at.exception and not at.error
    assert at.get("plotly_chart"), "the timeline chart is drawn"
    claims = at.dataframe[0].value
    assert list(claims["step"])[-4] == "7. del d"
    # del d hands 48 MiB straight back: RSS drops by about the tensor size (by hand: 48 MiB)
    assert -52 < float(claims.loc[claims["step"] == "7. del d", "Δ RSS (MiB)"].iloc[0]) < -44
    assert any("Not measured on a CPU" in c.value for c in at.caption)


def test_custom_composer_validates_each_step(cpu_app):
    at = _open(cpu_app)
    at.selectbox(key="allocator.scenario").set_value("custom").run()
    at.selectbox(key="allocator.op").set_value("free").run()
    at.button(key="allocator.add").click().run()
    assert any("no tensor named 'a'" in e.value for e in at.error)
    at.selectbox(key="allocator.op").set_value("alloc").run()
    at.number_input(key="allocator.mib").set_value(8).run()
    at.button(key="allocator.add").click().run()
    assert at.session_state["allocator.custom_steps"] == ["alloc a 8"]
    at.selectbox(key="allocator.op").set_value("free").run()
    at.button(key="allocator.add").click().run()
    assert at.session_state["allocator.custom_steps"] == ["alloc a 8", "free a"]


def test_size_beyond_free_memory_is_refused_with_the_limit(cpu_app):
    at = _open(cpu_app)
    at.number_input(key="allocator.size").set_value(10**6).run()
    at.button(key="allocator.button").click().run()
    assert any("free on this device" in e.value and "limit" in e.value for e in at.error)


# --- figure builders (plain functions), on hand-made GPU-shaped rows ---------------------------------


def _gpu_run(setting="default", with_trace=False):
    from core.result import RunResult

    mib = 2**20
    seg = [
        {
            "total_size": 64 * mib,
            "segment_type": "large",
            "expandable": False,
            "blocks_dropped": 0,
            "blocks": [
                {"offset": 0, "size": 16 * mib, "state": "active_allocated"},
                {"offset": 16 * mib, "size": 48 * mib, "state": "inactive"},
            ],
        }
    ]
    rows = []
    for i, (alloc, reserved) in enumerate([(0, 0), (16, 64), (0, 64)]):
        rows.append(
            {
                "index": i,
                "step": f"{i}. s{i}",
                "op": "",
                "status": "ok",
                "note": "",
                "alloc_conf_seen": setting,
                "rss_bytes": 100 * mib,
                "allocated_bytes": alloc * mib,
                "reserved_bytes": reserved * mib,
                "peak_allocated_bytes": 16 * mib,
                "driver_used_bytes": 600 * mib,
                "segment_map": seg if i else [],
                "trace": [[1000, "segment_alloc", 64 * mib], [1500, "alloc", 16 * mib]]
                if with_trace and i == 1
                else [[4000, "free_requested", 16 * mib], [4000, "free_completed", 16 * mib]]
                if with_trace and i == 2
                else [],
            }
        )
    return RunResult(
        experiment="allocator",
        config={"scenario": "custom"},
        device={"kind": "cuda", "label": "GPU"},
        versions={},
        started_at="2026-01-01T00:00:00+00:00",
        finished_at=None,
        status="ok",
        rows=rows,
        meta={"alloc_conf_seen": setting},
    )


def test_segment_map_draws_each_block_at_its_offset():
    from render.plots import allocator as plots

    chart = plots.segment_map(_gpu_run(), 1)
    bars = [(t.name, t.base[0], t.x[0]) for t in chart.figure.data]
    assert bars == [("active_allocated", 0, 16), ("inactive", 16, 48)]  # MiB


def test_history_accumulates_active_and_reserved_by_hand():
    from render.plots import allocator as plots

    chart = plots.history(_gpu_run(with_trace=True))
    df = chart.data
    assert list(df["active_bytes"] // 2**20) == [0, 16, 16, 0]  # segment, alloc 16, free requested, free completed
    assert list(df["reserved_bytes"] // 2**20) == [64, 64, 64, 64]
    assert list(df["time_ms"]) == [0, 0.5, 3, 3]
    assert plots.history(_gpu_run()) is None


def test_overlay_draws_reserved_and_allocated_per_setting():
    from render.plots import allocator as plots

    (chart,) = plots.overlay([_gpu_run("default"), _gpu_run("expandable_segments:True")])
    assert [t.name for t in chart.figure.data] == [
        "default · reserved",
        "default · allocated",
        "expandable_segments:True · reserved",
        "expandable_segments:True · allocated",
    ]
    assert list(chart.figure.data[2].y) == [0, 64, 64]
    assert "segment_map" not in chart.data.columns  # nested JSON never goes into the CSV export


# --- on a GPU (the sidebar on cuda:0) ------------------------------------------------------------


@pytest.mark.gpu
def test_page_on_a_gpu_offers_every_scenario_and_measures_the_backward_peak(gpu_app):
    at = _open(gpu_app)
    assert not any("no caching allocator" in i.value for i in at.info)
    assert at.selectbox(key="allocator.scenario").options == ["lifecycle", "backward-peak", "fragmentation", "custom"]
    at.selectbox(key="allocator.scenario").set_value("backward-peak").run()
    at.number_input(key="allocator.size").set_value(64).run()
    at.button(key="allocator.button").click().run()
    _wait_for_result(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    backward = next(d.value for d in at.dataframe if "measured peak / size(x)" in d.value.columns)
    # y = 5*x keeps x, y, grad of y and x.grad alive (4 sizes); (5*x) keeps 3: the seed's arithmetic
    assert list(backward["measured peak / size(x)"].round(1)) == [4.0, 3.0]
    assert not any("Not measured on a CPU" in c.value for c in at.caption)


def test_segment_map_colours_every_block_state_a_snapshot_writes():
    from render.plots import allocator as plots

    run = _gpu_run()
    run.rows[1]["segment_map"][0]["blocks"][1]["state"] = "active_pending_free"  # as real snapshots write it
    chart = plots.segment_map(run, 1)
    colours = {t.name: t.marker.color for t in chart.figure.data}
    assert colours == {"active_allocated": "#d62728", "active_pending_free": "#ff7f0e"}  # not the grey fallback
