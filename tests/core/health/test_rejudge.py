"""The health check recorded on an H200 (examples/), judged again through ``health --judge``: healthy and
power-limited by today's rules, its published reference labelled with the card it was measured on; the same runs
made 40 % slower with a hardware slowdown read far below and name it. Expectations are worked out by hand from
the file's own numbers."""

import copy
import json
import subprocess
import sys

import pytest

from core.hardware.health_reference import SAME_SHAPE
from core.store import RunStore
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "nvidia-h200-2026-11-26.json"
CHECK, SOAK, MATMUL = (
    "c3805406f57548b7ac0984ce06c69bfc",
    "3046038d0d864232948fe7a301ae34db",
    "59ea65d35798429288fad92376dcab78",
)
PEAK_PER_GHZ = 989.4 / 1.830  # the H200 SXM sheet: 989.4 dense bf16 TFLOPS at 1,830 MHz
CARD = "measured on an H100 SXM; the source says the H200 SXM is the same"


def runs_of(path=EXAMPLE) -> dict:
    return {r["id"]: r for r in json.loads(path.read_text())["runs"]}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The shipped runs and a degraded copy of the check, imported as a user imports a runs file."""
    folder = tmp_path_factory.mktemp("h200")
    db = folder / "runs.sqlite"
    store = RunStore(db)
    store.import_file(EXAMPLE)
    store.import_file(_degraded(folder / "degraded.json"))
    return db


def _degraded(path):
    """The check's soak 40 % slower at the same clocks, with NVML's hw_slowdown beside its power cap."""
    data = json.loads(EXAMPLE.read_text())
    runs = runs_of()
    soak, check = copy.deepcopy(runs[SOAK]), copy.deepcopy(runs[CHECK])
    soak["id"], check["id"] = "slowsoak", "slowcheck"
    for key in ("burst_tflops", "sustained_tflops"):
        soak["meta"][key] *= 0.6
    soak["meta"]["sustained_slowdown_reasons"] = ["hw_slowdown", "sw_power_cap"]
    for row in soak["rows"]:
        row["tflops"] *= 0.6
        row["throttle_reasons"] = sorted({*row["throttle_reasons"], "hw_slowdown"})
    check["meta"]["run_ids"] = ["slowsoak", check["meta"]["run_ids"][1]]
    path.write_text(json.dumps(data | {"runs": [soak, check]}))
    return path


def health(db, *args):
    out = subprocess.run(
        [sys.executable, "-m", "core", "health", "--db", str(db), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out


def test_the_h200_check_judged_again_is_healthy_and_power_limited(db, tmp_path):
    html = tmp_path / "health.html"
    out = health(db, "--judge", CHECK[:8], "--json", "--html", str(html))
    assert out.returncode == 0, out.stderr[-2000:]
    bundle = json.loads(out.stdout)
    assert bundle["verdict"] == "healthy" and bundle["id"] == CHECK
    assert bundle["judged_again"]["origin"].startswith("imported from another box: vm: GPU-c6238678")
    meta = runs_of()[SOAK]["meta"]
    rows = {r["figure"]: r for r in bundle["rows"]}
    for phase in ("burst", "sustained"):
        row = rows[f"matmul bf16 {phase}"]
        per_ghz = meta[f"{phase}_tflops"] / (meta[f"{phase}_sm_clock_mhz"] / 1000)  # 657.0 / 1.4535 = 452.0
        assert row["verdict"] == "pass" and row["clocks"]["state"] == "power-limited"
        assert (
            row["clocks"]["reasons"] == ["sw_power_cap"]
            and row["clocks"]["sm_clock_mhz"] == meta[f"{phase}_sm_clock_mhz"]
        )
        assert row["per_clock"]["efficiency"] == pytest.approx(per_ghz / PEAK_PER_GHZ)  # 83.6 %
        # never the searched maximum: the same 8192³ shape per clock on the healthy card
        assert row["reference_kind"] == "same shape per clock"
        assert row["fraction"] == pytest.approx(per_ghz / (678.59 / 1.515))
        assert row["published_note"].startswith(f"published 794.5 TFLOPS, {CARD}: not comparable: a fixed 8192")
    assert "Power-limited while measured, which is normal" in bundle["answer"]
    page = html.read_text()
    assert CARD in page and "Judged again by today's rules" in page and "power-limited" in page


def test_the_text_answer_names_the_power_cap_the_per_clock_efficiency_and_the_card(db):
    out = health(db, "--judge", CHECK)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    meta = runs_of()[SOAK]["meta"]
    share = meta["burst_tflops"] / (meta["burst_sm_clock_mhz"] / 1000) / PEAK_PER_GHZ
    assert f"{share:.1%} of the peak per clock" in text and f"{share:.1%} of peak" in text  # 83.6 %
    assert text.startswith("Judged again by today's rules: imported from another box: vm")
    assert "Healthy on vm" in text and "NVML: sw_power_cap (power-limited)" in text
    assert f"published 794.5 TFLOPS, {CARD}: not comparable" in text


def test_the_same_check_forty_percent_slower_with_a_hardware_slowdown_is_far_below(db):
    out = health(db, "--judge", "slowcheck", "--json")
    assert out.returncode == 1, out.stderr[-2000:]
    bundle = json.loads(out.stdout)
    rows = {r["figure"]: r for r in bundle["rows"]}
    for phase in ("burst", "sustained"):
        row = rows[f"matmul bf16 {phase}"]
        assert row["verdict"] == "far below"  # 0.6 × 100.9 % = 60.6 % of the healthy card per clock, under 70 %
        assert row["clocks"]["state"] == "fault" and "hardware slowdown (NVML hw_slowdown)" in row["reason"]
    assert bundle["verdict"] == "below expected"
    assert bundle["answer"].endswith("The card named a fault while measured: hardware slowdown (NVML hw_slowdown).")


def test_only_a_health_check_can_be_judged_again(db):
    out = health(db, "--judge", MATMUL)
    assert out.returncode == 2 and f"run {MATMUL} is a matmul run, not a health check" in out.stderr
    assert health(db, "--judge", "nosuchrun").returncode == 2


def test_the_same_shape_references_quote_the_shipped_runs():
    """Each per-clock reference is the H200's 8192³ point of the shipped matmul run: its TFLOPS and the SM clock
    NVML sampled over it."""
    points = {r["dtype"]: r for r in runs_of()[MATMUL]["rows"] if r["m"] == 8192 and r["status"] == "ok"}
    for ref in SAME_SHAPE:
        point = points[ref.dtype]
        assert (ref.m, ref.n, ref.k) == (point["m"], point["n"], point["k"])
        assert ref.tflops == pytest.approx(point["tflops"], abs=0.005)
        assert ref.sm_clock_mhz == point["sm_clock_mhz"] and point["throttle_reasons"] == ["sw_power_cap"]
