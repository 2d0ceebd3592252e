"""The HTML report (library and ``python -m core report``): self-contained, complete, honest about gaps."""

import re
import sys

import pytest

from core.cli import main
from tests.factories import make_run

H100 = {
    "kind": "cuda",
    "name": "NVIDIA H100 80GB HBM3",
    "label": "cuda:0 — NVIDIA H100 80GB HBM3",
    "total_memory_bytes": 80 * 2**30,
    "compute_capability": "9.0",
    "multiprocessors": 132,
    "spec": {"name": "H100 SXM", "tflops": {"bf16": 989.4}},
}
CPU = {"kind": "cpu", "name": "Test CPU", "label": "CPU — Test CPU", "cores": 2}


def sweep(device, scale, run_id, experiment="sweep", **config):
    rows = [{"size": s, "dtype": "bf16", "tflops": scale * s / 256} for s in (256, 512, 1024)]
    return make_run(
        experiment,
        rows,
        device=device,
        config={"dtype": "bf16", **config},
        started_at="2026-03-01T00:00:00+00:00",
        finished_at="2026-03-01T00:00:02+00:00",
        name=f"run {run_id}",
        id=run_id,
    )


def probe(run_id, status="ok", error=None):
    return make_run(
        "probe",
        [{"step": 1, "t": 10.0}, {"step": 2, "t": 10.5}],
        device=CPU,
        status=status,
        config={"mode": "ok", "steps": 2, "seconds": 0.0},
        started_at="2026-03-02T00:00:00+00:00",
        finished_at="2026-03-02T00:00:01+00:00",
        error=error,
        id=run_id,
    )


def build(runs):
    from render.report import build_report

    return build_report(runs, "Test report")


def _scripts(text):
    return re.findall(r"<script[^>]*>", text, re.I)


def test_report_is_self_contained_and_names_devices_and_settings():
    text = build([sweep(H100, 1.0, "aa01", sizes=[256, 512]), probe("bb02")])
    assert all("src" not in tag.lower() for tag in _scripts(text))  # plotly.js inline, nothing fetched
    assert len(text) > 3_000_000 and text.count("Plotly.newPlot") == 2  # one chart per run (tflops, probe steps)
    assert "cuda:0 — NVIDIA H100 80GB HBM3" in text and "80.0 GiB" in text and "H100 SXM" in text
    assert "CPU — Test CPU" in text
    assert "<th>sizes</th><td>256,512</td>" in text and "<th>mode</th><td>ok</td>" in text
    assert "id='run-aa01'" in text and "id='run-bb02'" in text


def test_report_compares_runs_of_one_experiment():
    text = build([sweep(H100, 1.0, "aa01"), sweep(CPU, 0.5, "cc03")])
    assert "Comparison: sweep (2 runs)" in text
    # absolute and percent-of-peak overlays (the H100 has a datasheet, the CPU has none) + each run's own chart
    assert text.count("Plotly.newPlot") == 4
    assert "% of own datasheet dense peak" in text and "no datasheet, not shown: CPU" in text
    assert "Differences against NVIDIA H100 80GB HBM3" in text


def test_report_escapes_user_text_and_reports_failures():
    bad = probe("dd04", status="error", error="<script>alert(1)</script>")
    bad.name = "<b>mine</b>"
    text = build([bad])
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text
    assert "&lt;b&gt;mine&lt;/b&gt;" in text and "status: error" in text


def test_report_needs_a_run():
    from render.report import build_report

    with pytest.raises(ValueError, match="at least one run"):
        build_report([])


def test_cli_writes_a_report(store, tmp_path, capsys):
    for run in (sweep(H100, 1.0, "aa01"), sweep(CPU, 0.5, "cc03")):
        store.save(run)
    out = tmp_path / "report.html"
    assert main(["report", "aa0", "cc0", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Comparison: sweep (2 runs)" in text and "opens offline" in capsys.readouterr().err
    assert main(["report", "nope", "-o", str(out)]) == 2
    assert "no run with id 'nope'" in capsys.readouterr().err


def test_cli_report_without_plotly_says_so(store, tmp_path, capsys, monkeypatch):
    store.save(probe("ee05"))
    # the renderers too: a re-import during the test would leave the package's attributes pointing at
    # half-imported modules after sys.modules is restored, breaking later tests.
    for name in [m for m in sys.modules if m in ("plotly", "render") or m.startswith(("plotly.", "render."))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly now raises ImportError
    assert main(["report", "ee05", "-o", str(tmp_path / "r.html")]) == 2
    assert "needs plotly" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
