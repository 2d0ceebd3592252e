"""Every finding of every shipped example, as the CLI prints it and the run stores it, is plain text a person
reads: no Markdown backticks, no Python list or dict (a shape is 4×8), and a share written as precisely as the
page's figure beside it. Each example is imported once, through the command line, into a private store."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from core.workload import examples
from tests.conftest import ROOT

pytest.importorskip("msgspec")

LEAKS = re.compile(r"`|\[\[|\[\d|\{'|\{\"|\bNone\b|\bnan\b")
IMPORTS = [(e.kind, e.name) for e in examples.EXAMPLES]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Each example imported by ``python -m core <kind> --example NAME``: its printed text and its stored run."""
    from core import cli
    from core.store import RunStore

    base = tmp_path_factory.mktemp("findings-text")
    out = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPULAB_DATA_DIR", str(base / "data"))
        env.setenv("GPULAB_LOCK_DIR", str(base / "locks"))
        env.delenv("GPULAB_DB", raising=False)
        for kind, name in IMPORTS:
            before = {r.id for r in RunStore().list()}
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                code = cli.main([kind, "--example", name])
            assert code in (0, 1), f"{kind} --example {name} exited {code}"  # a hang found exits 1
            (run,) = [r for r in RunStore().list() if r.id not in before]
            out[name] = (printed.getvalue(), run)
    return out


@pytest.mark.parametrize("name", [n for _, n in IMPORTS])
def test_findings_are_plain_text_in_the_cli_and_the_stored_run(imported, name):
    printed, run = imported[name]
    lines = [line for line in printed.splitlines() if line.startswith("finding: ")]
    assert lines, f"{name}: no finding printed"
    stored = [f["text"] for f in run.meta["findings"]]
    assert lines == [f"finding: {t}" for t in stored]
    for text in stored:
        assert not LEAKS.search(text), f"{name}: {LEAKS.search(text).group(0)!r} in {text!r}"


def test_the_docs_say_how_many_findings_an_import_opens_with_as_the_code_caps_them(imported):
    """The README and the methods say "up to three findings": the cap is three for every kind of file, and no
    example's import stores more."""
    from core.workload import findings
    from core.workload.hang import findings as hang_findings

    assert findings.MAX_FINDINGS == hang_findings.MAX_FINDINGS == 3
    assert all(1 <= len(run.meta["findings"]) <= 3 for _, run in imported.values())
    for doc in ("README.md", "docs/methods/step_bench.md", "docs/methods/snapshot.md"):
        assert "up to three" in (ROOT / doc).read_text(), doc


@pytest.mark.parametrize("name", [e.name for e in examples.of_kind("hang")])
def test_a_hang_finding_writes_the_tensor_s_shape_as_a_person_does(imported, name):
    """Each dump set's all_reduce takes a 4×8 float tensor (tests/data/flight_recorder/generate.py: torch.ones(4,
    8)), 128 B."""
    _, run = imported[name]
    assert "128 B Float, shape 4×8)" in run.meta["findings"][0]["text"]


def test_the_host_s_share_of_the_idle_is_the_page_s_figure(imported):
    """The A100 trace's idle is 99.6 % host wait (its idle causes, summed here): the finding says 99.6 %, as the
    page's Host wait figure does, where it said 100 %."""
    _, run = imported["resnet50-a100"]
    causes = run.meta["idle_causes"]
    share = causes["host_wait_us"] / sum(causes.values())
    assert 0.99 < share < 0.9995
    (idle,) = [f for f in run.meta["findings"] if f["kind"] == "idle"]
    assert f"{share:.1%} of it waiting on the host" in idle["text"]


def test_the_straggler_finding_names_its_operator_without_markup(imported):
    _, run = imported["recsys-a100-ranks"]
    text = run.meta["findings"][0]["text"]
    assert "by operator, torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op> +43.5 ms" in text
