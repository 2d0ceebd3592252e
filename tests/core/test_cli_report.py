"""``core/cli/report.py``, the command line's one import of the renderers: only ``report`` and ``health --html``
load them, and where they are missing both say so before doing any work."""

import subprocess
import sys

from core.cli import main
from tests.conftest import ROOT
from tests.factories import make_run


def test_building_every_command_loads_no_renderer():
    code = (
        "import sys\nfrom core.cli import build_parser\n"
        "args = build_parser().parse_args(['report', 'some-id'])\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('render', 'plotly', 'pandas')]\n"
        "assert not loaded, loaded\nprint(args.handler.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "core.cli.report"  # the command is there, its renderer is not loaded


def _without_renderers(monkeypatch):
    for name in [m for m in sys.modules if m == "render" or m.startswith("render.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "render", None)  # import render now raises ImportError


def test_report_without_the_renderers_says_what_it_needs(store, tmp_path, capsys, monkeypatch):
    run = make_run("probe", id="ab12")
    store.save(run)
    _without_renderers(monkeypatch)
    assert main(["report", "ab12", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "an HTML report needs the renderers" in err and "pip install plotly pandas" in err
    assert not (tmp_path / "r.html").exists()


def test_health_html_without_the_renderers_is_refused_before_any_check(data_dir, tmp_path, capsys, monkeypatch):
    _without_renderers(monkeypatch)
    assert main(["health", "--device", "cpu", "--html", str(tmp_path / "h.html")]) == 2
    assert "an HTML report needs the renderers" in capsys.readouterr().err
    assert not (tmp_path / "h.html").exists() and not (data_dir / "runs.sqlite").exists()
