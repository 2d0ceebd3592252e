"""The health check's steps on stand-in results (the soak through a hand-made run), its doctor rows, and the
command on the CPU for real: JSON rows, the top-level verdict and the exit code."""

import json
import subprocess
import sys

import pytest

from core.doctor import Check, Report
from core.health import check
from core.health.check import run_health
from core.health.config import HealthConfig
from core.store import RunStore
from tests.conftest import ROOT
from tests.core.health.test_verdict import H100_SXM, gpu, stand_in_soak
from tests.factories import make_run

H200 = gpu("NVIDIA H200", 141)


class Done:
    def __init__(self, run):
        self.run = run

    def wait(self, timeout=None):
        return self.run


class StandIn:
    """A job manager that answers every submission with a hand-made run."""

    store = None

    def __init__(self, answer):
        self.answer, self.submitted = answer, []

    def submit(self, experiment, config, device="auto", **kw):
        self.submitted.append((experiment, config, device))
        return Done(self.answer(experiment, config, device))

    def shutdown(self):
        pass


def test_without_the_soak_experiment_the_step_says_so_and_the_rest_runs(monkeypatch):
    monkeypatch.setattr(check, "soak_available", lambda: False)
    manager = StandIn(lambda *a: None)
    report = run_health(HealthConfig(device="cpu", parts=("soak",)), manager)
    (row,) = report.rows
    assert row.verdict == "not measured" and "not available in this build" in row.reason
    assert manager.submitted == [] and report.verdict == "healthy" and report.exit_code == 0


def test_the_soak_step_runs_matmul_soak_on_the_gpu_and_judges_it(monkeypatch):
    monkeypatch.setattr(check, "soak_available", lambda: True)
    monkeypatch.setattr(check, "soak_config", lambda dtype, seconds: {"dtype": dtype, "duration_s": seconds})
    soak = stand_in_soak(H100_SXM, 760.0, 640.0, True, clocks=(1755.0, 1755.0))
    manager = StandIn(lambda exp, cfg, device: soak)
    report = run_health(HealthConfig(device="cuda:0", parts=("soak",), soak_s=30.0), manager)
    assert manager.submitted == [("matmul-soak", {"dtype": "bf16", "duration_s": 30.0}, "cuda:0")]
    verdicts = {r.figure: r.verdict for r in report.rows}
    assert verdicts == {
        "matmul bf16 burst": "pass",  # per clock 760 / 1.755 = 433.0 TFLOPS/GHz = 96.7 % of the healthy 447.9
        "matmul bf16 sustained": "below expected",  # 640 / 1.755 = 364.7 = 81.4 %
        "matmul bf16 burst→sustained drop": "below expected",  # flagged by the soak
    }
    assert report.verdict == "below expected" and report.exit_code == 1
    assert report.bundle()["answer"].startswith("Not healthy on node-a: GPU-aaaa: 2 below expected (")
    assert "matmul bf16 sustained @ cuda:0" in report.bundle()["answer"]
    stored = report.to_run()
    assert stored.experiment == "health" and stored.meta["verdict"] == "below expected"
    assert stored.meta["box"] == {"host": "node-a", "devices": ["GPU-aaaa"]}


def test_the_search_step_runs_a_bounded_search_on_every_gpu_and_the_published_maximum_judges_its_best(monkeypatch):
    """The best of the search at the published shape, 750 TFLOPS: 750 / 794.5 = 94.4 % (pass), labelled with the
    card the published figure was measured on."""
    h200 = H200 | {"index": 1, "torch_device": "cuda:1", "uuid": "GPU-bbbb"}

    def searched(exp, cfg, device):
        return make_run(
            "matmul",
            config=cfg,
            device=H200 if device == "cuda:0" else h200,
            id=f"search-{device}",
            rows=[{"dtype": "bf16", "m": 2048, "n": 2048, "k": 13312, "tflops": 750.0, "sm_clock_mhz": 1700.0}],
            meta={"best": {"bf16": {"m": 2048, "n": 2048, "k": 13312, "tflops": 750.0}}},
        )

    manager = StandIn(searched)
    monkeypatch.setattr(check, "_gpus", lambda device: ["cuda:0", "cuda:1"])
    report = run_health(HealthConfig(device="all", parts=("search",), search_s=20.0), manager)
    config = {"dtypes": ["bf16"], "mamf": True, "budget_s": 20.0, "roofline": False, "accuracy": False}
    assert manager.submitted == [("matmul", config, "cuda:0"), ("matmul", config, "cuda:1")]
    row = report.rows[0]
    assert (row.figure, row.verdict, row.reference_kind) == ("matmul bf16 searched", "pass", "published")
    assert row.fraction == pytest.approx(750 / 794.5)
    assert row.reference_card == "measured on an H100 SXM; the source says the H200 SXM is the same"
    assert report.judged == [r.id for r in report.runs] and report.verdict == "healthy"


def test_a_soak_that_fails_is_a_failed_row():
    run = stand_in_soak(H100_SXM, 1.0, 1.0, False)
    run.status, run.error = "error", "timed out after 60 s"
    (row,) = check._run_rows("matmul bf16 soak", run, None)
    assert row.verdict == "fail" and row.reason == "timed out after 60 s"


def doctor_run(experiment, status):
    return make_run(experiment, device={"kind": "cpu", "torch_device": "cpu"}, status=status)


def test_the_doctors_runs_are_one_row_and_its_cross_checks_one_each():
    report = Report(device="cpu", runs=[doctor_run("probe", "ok"), doctor_run("max-batch", "unsupported")])
    report.checks = [
        Check("worker round trip (probe) runs", "ok, 1 rows", "ok", "pass"),
        Check("max batch (max-batch) runs", "unsupported", "ok or unsupported", "unsupported", "a CPU has no limit"),
        Check("seed: 65536 stored in fp16", "inf", "inf", "pass"),
        Check("matmul timer vs torch.utils.benchmark", "ratio 3.1", "0.5–2", "fail", "disagree"),
    ]
    rows = check._doctor_rows(report)
    assert [(r.figure, r.measured, r.verdict) for r in rows] == [
        ("doctor: every experiment runs", "1 of 2 ok, 1 unsupported here", "pass"),
        ("doctor: seed: 65536 stored in fp16", "inf", "pass"),
        ("doctor: matmul timer vs torch.utils.benchmark", "ratio 3.1", "fail"),
    ]
    assert rows[0].reason == "unsupported here: max batch (max-batch)"


def test_health_on_the_cpu_prints_json_rows_and_a_verdict(tmp_path):
    """The real command: gloo all_reduce between two CPU processes, the copies unsupported with the reason."""
    db = tmp_path / "runs.sqlite"
    command = [sys.executable, "-m", "core", "health", "--device", "cpu", "--parts", "copies,collectives", "--quick"]
    html = tmp_path / "health.html"
    out = subprocess.run(
        [*command, "--json", "--db", str(db), "--html", str(html)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    bundle = json.loads(out.stdout)
    assert bundle["verdict"] == "healthy" and bundle["box"]["host"]
    for row in bundle["rows"]:
        assert {"figure", "measured", "reference", "verdict"} <= row.keys()
    rows = {r["figure"]: r for r in bundle["rows"]}
    reduce = rows["all_reduce busbw"]
    assert reduce["measured"] > 0 and reduce["reference"] is None and reduce["verdict"] == "no reference"
    assert reduce["reason"].startswith("no reference for CPU — ")
    assert rows["host↔device copies"]["verdict"] == "not measured"
    listed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "core", "runs", "list", "--db", str(db), "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    assert [r["experiment"] for r in listed] == ["health"]  # one check, one stored run: its parts inside it
    (part,) = RunStore(db).get(bundle["id"]).meta["parts"]
    assert part["experiment"] == "interconnect" and part["status"] == "ok"
    page = html.read_text()
    assert "<h1>Health report</h1>" in page and bundle["id"] in page and "all_reduce busbw" in page
    bad = subprocess.run([*command[:6], "--parts", "soak,nap"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "nap not one of doctor, soak, search, copies, collectives" in bad.stderr


@pytest.mark.gpu
def test_health_on_a_gpu_judges_the_pinned_copies_by_the_cards_link(tmp_path):
    """A known SKU gets its PCIe link's reference (an unknown one says so); the verdict decides the exit code."""
    out = subprocess.run(
        [sys.executable, "-m", "core", "health", "--device", "cuda:0", "--parts", "copies", "--quick", "--json",
         "--db", str(tmp_path / "runs.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    bundle = json.loads(out.stdout)
    assert out.returncode == (0 if bundle["verdict"] == "healthy" else 1), out.stderr[-2000:]
    copies = [r for r in bundle["rows"] if r["figure"] in ("h2d pinned", "d2h pinned")]
    assert copies and all(r["measured"] > 0 for r in copies)
    for r in copies:
        if r["reference"] is None:
            assert r["verdict"] == "no reference" and r["reason"].startswith("no reference for ")
        else:
            assert r["reference_kind"] == "datasheet" and r["fraction"] == pytest.approx(r["measured"] / r["reference"])
