"""Where an imported run's numbers come from, as every chart and banner says it (render.style.device_label)."""

from core.result import RunResult
from core.workload import examples
from render.style import device_label


def imported(**meta) -> RunResult:
    return RunResult("flight-recorder", {}, {"kind": "cpu"}, {}, "2026-01-01T00:00:00", None, "ok", meta=meta)


def test_a_hang_the_lab_recorded_is_never_said_recorded_elsewhere():
    """The shipped hang dumps were recorded by this lab (tests/data/flight_recorder/generate.py): the banner above
    them said "recorded elsewhere" beside the page's "recorded by this lab"."""
    meta = {"recorded_on": "the machines that ran the job (imported files)", "file": "skipped_rank"}
    said = device_label(imported(**meta, example=examples.provenance(examples.find("hang-skipped-rank"))))
    assert "elsewhere" not in said and said.startswith("imported skipped_rank — recorded by this lab: a gloo job")


def test_a_trace_recorded_elsewhere_still_says_so_with_its_gpu_and_source():
    example = examples.find("resnet50-v100")
    meta = {"recorded_on": "the machine that recorded the trace (imported file)", "file": "t.json.gz"}
    said = device_label(imported(**meta, device_name=example.gpu, example=examples.provenance(example)))
    assert said == f"imported t.json.gz — recorded elsewhere on {example.gpu} ({example.repository})"


def test_a_long_subtitle_is_wrapped_into_lines_the_chart_holds_and_the_margin_grows():
    """Plotly never wraps a title: the segment map's subtitle (file, source, what is not drawn: 160 characters) ran
    past the chart's edge at 1280 px. Lines of at most SUBTITLE_CHARS, broken at " · ", with room above the plot."""
    import plotly.graph_objects as go

    from render.style import SUBTITLE_CHARS, style, title

    example = examples.find("train-step-snapshot")
    meta = {"recorded_on": "x", "file": "cs336_train_step.pickle.gz", "example": examples.provenance(example)}
    text = title("Segment map", imported(**meta), "6 small blocks not drawn · 96 segments")
    head, *lines = text.split("<br>")
    assert head == "Segment map" and len(lines) == 2
    assert all(line.startswith("<sup>") and len(line) - len("<sup></sup>") <= SUBTITLE_CHARS for line in lines)
    assert " ".join(line[5:-6] for line in lines).replace("  ", " ") == (
        f"imported cs336_train_step.pickle.gz — {example.label} · 6 small blocks not drawn · 96 segments"
    )
    one = style(go.Figure(), title("t", None, "short"), "x", "y").layout
    # Chromium draws a subtitle line 21 px tall: a line more, 22 px more (15 let a third line overprint the top tick)
    assert style(go.Figure(), text, "x", "y").layout.margin.t == one.margin.t + 22
    # hung from the chart's top edge, so the lines grow down into the margin made for them, not into the plot
    assert (one.title.yref, one.title.y, one.title.yanchor) == ("container", 1, "top")
