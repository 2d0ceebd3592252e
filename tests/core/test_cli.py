"""``python -m core``: JSON out, the same store as the dashboard, clear errors."""
import json
import subprocess
import sys

from tests.conftest import ROOT


def cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, input=input)


def test_info_json_has_devices_versions_flags_and_datasheet_entry():
    out = cli("info", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    for d in info["devices"]:
        assert {"name", "total_memory_bytes", "tf32", "spec", "bf16_supported"} <= set(d)
    assert {"torch", "cuda", "cudnn", "driver", "python"} <= set(info["versions"])


def test_experiment_json_is_saved_and_listed(data_dir):
    out = cli("probe", "--steps", "2", "--device", "cpu", "--json", "--name", "first")
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    assert run["status"] == "ok" and run["experiment"] == "probe" and run["config"]["steps"] == 2
    assert run["device"]["kind"] == "cpu" and run["versions"]["torch"]
    assert "[1/2]" in out.stderr  # progress goes to stderr, stdout is pure JSON
    listed = json.loads(cli("runs", "list", "--json").stdout)
    assert [r["id"] for r in listed] == [run["id"]] and listed[0]["name"] == "first"
    shown = json.loads(cli("runs", "show", run["id"][:8], "--json").stdout)
    assert shown["rows"] == run["rows"]


def test_no_save_leaves_the_store_empty():
    assert cli("probe", "--steps", "1", "--device", "cpu", "--no-save").returncode == 0
    assert "no runs stored" in cli("runs", "list").stdout


def test_export_import_round_trip_through_the_cli(tmp_path, monkeypatch):
    assert cli("probe", "--steps", "1", "--device", "cpu").returncode == 0
    exported = tmp_path / "runs.json"
    assert cli("runs", "export", "-o", str(exported)).returncode == 0
    monkeypatch.setenv("GPULAB_DATA_DIR", str(tmp_path / "other"))
    out = cli("runs", "import", str(exported))
    assert out.returncode == 0 and "imported 1 run(s); 0 already present" in out.stdout
    assert "(imported)" in cli("runs", "list").stdout


def test_bad_values_exit_2_with_a_clear_message():
    out = cli("probe", "--steps", "lots", "--device", "cpu")
    assert out.returncode == 2 and "steps: expected a whole number, got 'lots'" in out.stderr
    out = cli("probe", "--device", "tpu")
    assert out.returncode == 2 and "not one of: auto, cpu, cuda, cuda:N" in out.stderr


def test_failed_run_exit_code_and_db_flag(tmp_path):
    db = tmp_path / "x.sqlite"
    out = cli("probe", "--mode", "raise", "--steps", "0", "--device", "cpu", "--db", str(db))
    assert out.returncode == 1 and "probe raised on purpose" in out.stdout
    assert "error" in cli("runs", "list", "--db", str(db)).stdout


def test_a_measurement_error_is_a_warning_in_text_and_json(store):
    from core.result import RunResult

    error = "measurement error: above the datasheet peak: bf16 8192×8192×8192 measured 1000.0 TFLOPS > 989.4"
    run = RunResult("matmul", {}, {"kind": "cuda", "name": "H100"}, {}, "2026-03-01T00:00:00+00:00", None, "ok",
                    rows=[{"dtype": "bf16", "tflops": 1000.0, "above_peak": True}], meta={"measurement_errors": [error]})
    store.save(run)
    for extra in ((), ("--json",)):
        out = cli("runs", "show", run.id[:8], *extra)
        assert out.returncode == 0 and f"warning: {error}" in out.stderr
