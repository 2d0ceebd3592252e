"""``python -m core``: JSON out, the same store as the dashboard, clear errors."""

import json
import subprocess
import sys

from tests.conftest import ROOT


def cli(*args, input=None):
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=180, input=input
    )


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
    assert out.returncode == 0 and "imported 1 run; 0 already present" in out.stdout
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
    run = RunResult(
        "matmul",
        {},
        {"kind": "cuda", "name": "H100"},
        {},
        "2026-03-01T00:00:00+00:00",
        None,
        "ok",
        rows=[{"dtype": "bf16", "tflops": 1000.0, "above_peak": True}],
        meta={"measurement_errors": [error]},
    )
    store.save(run)
    for extra in ((), ("--json",)):
        out = cli("runs", "show", run.id[:8], *extra)
        assert out.returncode == 0 and f"warning: {error}" in out.stderr


# -- careless and hostile input (issue 15) ---------------------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from core import cli as core_cli  # noqa: E402


def _stored_run(store, name="", device_name="Test CPU", status="ok", run_id=None):
    from core.result import RunResult

    run = RunResult(
        "probe",
        {"steps": 1},
        {"kind": "cpu", "name": device_name},
        {},
        "2026-01-01T00:00:00+00:00",
        "2026-01-01T00:00:01+00:00",
        status,
        name=name,
    )
    if run_id:
        run.id = run_id
    store.save(run)  # straight into the database, as a run stored before names were checked
    return run


def test_runs_list_escapes_terminal_codes_and_newlines(store, capsys):
    """Finding 7: a name holding ESC [2J cleared the screen; a newline faked a second run."""
    _stored_run(store, name="a\x1b[2Jb\nfake 0000 line", device_name="GPU\x1b]0;pwned\x07")
    _stored_run(store, name="plain")
    assert core_cli.main(["runs", "list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert len(out.splitlines()) == 2 and "a\\x1b[2Jb\\nfake 0000 line" in out
    assert core_cli.main(["runs", "show", store.list()[-1].id]) == 0
    assert "\x1b" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "name, why",
    [
        ("x" * 121, "121 characters long; the limit is 120"),
        ("a\x1b[31mred", "control character \\x1b"),
        ("two\nlines", "\\n"),
    ],
)
def test_names_have_one_limit_everywhere(name, why, store, capsys):
    """Finding 7: names had no limit on the CLI (100k characters) while the page capped them at 120."""
    assert core_cli.main(["probe", "--steps", "1", "--device", "cpu", "--name", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: name") and why in err
    run = _stored_run(store)
    with pytest.raises(ValueError, match="name"):
        store.relabel(run.id, name=name)
    with pytest.raises(ValueError, match="tag"):
        store.relabel(run.id, tags=["ok", name])
    assert store.get(run.id).name == ""


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf", "soon", "1e400"])
def test_bad_timeouts_are_refused_naming_the_option(value, capsys):
    """Finding 9: nan never fired, -1 'timed out' with exit 1, 0 silently became 3600."""
    with pytest.raises(SystemExit) as exc:
        core_cli.main(["probe", "--steps", "1", "--device", "cpu", "--no-save", "--timeout", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "Traceback" not in err


def test_the_timeout_bounds_the_wait_for_the_device_lock(manager, data_dir):
    """Finding 9: --timeout 5 still waited for the device lock at 25 s."""
    import fcntl

    from core.paths import lock_dir

    fd = os.open(lock_dir() / "cpu.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another GPU Lab process is "running a job" on the CPU
    try:
        begun = time.monotonic()
        run = manager.submit("probe", {"steps": 1}, "cpu", timeout_s=4).wait(120)
        took = time.monotonic() - begun
    finally:
        os.close(fd)
    assert run.status == "error" and "timed out after 4 s" in run.error, run.error
    assert took < 30


@pytest.mark.parametrize("timeout", [float("nan"), -1.0, 0.0, float("inf")])
def test_the_job_manager_refuses_the_same_timeouts(manager, timeout):
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="timeout"):
        manager.submit("probe", {"steps": 1}, "cpu", timeout_s=timeout)


def test_an_oversized_seed_is_refused_naming_the_option(capsys):
    """Finding 10: --seed 99999999999999999999999 ended in 'Overflow when unpacking long long', exit 1."""
    for experiment in ("matmul", "quantize", "rounding", "train-memory", "reference", "interconnect"):
        assert core_cli.main([experiment, "--seed", "99999999999999999999999", "--device", "cpu", "--no-save"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: seed") and "Traceback" not in err, (experiment, err)


def test_custom_values_beyond_float32_are_refused(capsys):
    """Finding 10: 1e308 becomes inf in float32 and bincount failed with exit 1."""
    code = core_cli.main(
        ["quantize", "--distribution", "custom", "--values", "1e308,-1e308", "--device", "cpu", "--no-save"]
    )
    assert code == 2
    assert "values" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, why",
    [
        (["report", "{id}", "-o", "/nonexistent/dir/r.html"], "No such file or directory"),
        (["report", "{id}", "-o", "/tmp"], "Is a directory"),
        (["runs", "export", "-o", "/nonexistent/x.json"], "No such file or directory"),
        (["runs", "export", "-o", "/tmp"], "Is a directory"),
    ],
)
def test_unwritable_outputs_exit_2_without_a_traceback(args, why, store, capsys):
    """Finding 11: these printed tracebacks."""
    run = _stored_run(store)
    code = core_cli.main([a.format(id=run.id) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: cannot write") and why in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args, option",
    [
        (["--since", "garbage"], "--since"),
        (["--until", "later"], "--until"),
        (["--limit", "99999999999999999999999"], "--limit"),
        (["--limit", "0"], "--limit"),
        (["--status", "great"], "--status"),
    ],
)
def test_runs_list_filters_are_checked(args, option, store, capsys):
    """Finding 12: --since garbage said 'no runs stored' (19 existed); a huge --limit said 'datatype mismatch'."""
    _stored_run(store)
    with pytest.raises(SystemExit) as exc:
        core_cli.main(["runs", "list", *args])
    assert exc.value.code == 2 and option in capsys.readouterr().err


def _start_probe(data_dir, steps=400):
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core",
            "probe",
            "--steps",
            str(steps),
            "--seconds",
            "0.05",
            "--device",
            "cpu",
            "--json",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in proc.stderr:  # wait until the run is really running
        seen.append(line)
        if line.startswith("[3/"):
            break
    else:
        raise AssertionError(f"the probe did not start: {''.join(seen)}")
    return proc, seen


@pytest.mark.parametrize("presses", [1, 2, 3, 6])
def test_ctrl_c_any_number_of_times_stores_the_run_as_cancelled(presses, data_dir, store):
    """Finding 8: two presses printed a KeyboardInterrupt traceback, three left the run 'running'."""
    proc, seen = _start_probe(data_dir)
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    err = "".join(seen) + err
    assert proc.returncode == 1, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    (run,) = store.list()
    assert run.status == "cancelled" and run.rows  # the points before the cancel are kept
    assert json.loads(out)["status"] == "cancelled"


def test_sigterm_stores_the_run_as_cancelled(data_dir, store):
    """``timeout 8 python -m core …`` sends SIGTERM: it left the run 'running' for good."""
    proc, _ = _start_probe(data_dir)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert store.list()[0].status == "cancelled"


def test_a_killed_cli_leaves_an_interrupted_run_not_a_running_one(data_dir, store, capsys):
    proc, _ = _start_probe(data_dir)
    time.sleep(2.5)  # past the 2 s interval at which a running job's rows reach the store
    proc.kill()
    proc.communicate(timeout=60)
    assert core_cli.main(["runs", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["status"] == "interrupted"


def test_help_lists_the_commands_a_user_runs_and_not_the_internal_experiments():
    out = cli("--help")
    assert out.returncode == 0, out.stderr
    # The sub-command list: one indented name at the start of each line of "positional arguments".
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("    ") and line.strip()}
    assert {"snapshot", "trace", "matmul"} <= listed
    assert not {"probe", "memory-snapshot", "profiler-trace", "profiler-trace-ranks"} & listed
    for name in ("probe", "memory-snapshot", "profiler-trace", "profiler-trace-ranks"):
        assert name not in out.stdout


def test_a_reader_that_stops_reading_ends_the_command_quietly():
    """`python -m core examples | head -1`: the reader closes the pipe (here before the first write); the command
    ends with its own exit code and no traceback, where a BrokenPipeError printed one and exited 1."""
    read, write = os.pipe()
    os.close(read)  # nobody will ever read what it writes
    proc = subprocess.run(
        [sys.executable, "-m", "core", "examples"], stdout=write, stderr=subprocess.PIPE, cwd=ROOT, timeout=120
    )
    os.close(write)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr


def test_a_command_s_own_module_registers_it_alone_as_the_whole_parser_does():
    """``python -m core trace …`` builds its parser from the one module the table names: each such command's parser
    is the one the whole parser holds (same options), and every hand-written command is in the table."""
    whole = core_cli.build_parser()
    commands = whole._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    from core.registry import experiments

    hand_written = set(commands) - set(experiments())
    assert hand_written == set(core_cli.COMMAND_MODULES)
    for command in core_cli.COMMAND_MODULES:
        alone = core_cli.build_parser(command)._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert command in alone and set(alone) < set(commands), command
        options = [a.option_strings for a in alone[command]._actions]
        assert options == [a.option_strings for a in commands[command]._actions], command
