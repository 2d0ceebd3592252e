"""Security defaults: the server listens on localhost only unless the user opts in, nothing a user
types is executed or evaluated, and imports are JSON with a size limit — never a pickle."""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import psutil
import pytest

from core import store as store_module
from core.store import ImportRefused, parse_runs_file
from tests.conftest import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for p in ROOT.rglob("*.py") if not {".git", ".venv", "node_modules"} & set(p.parts))

# name → why it is refused. Calls are matched on the AST, so strings and comments never trip the test.
FORBIDDEN_CALLS = {
    "eval": "evaluates text as code",
    "exec": "executes text as code",
    "compile": "builds code from text",
    "__import__": "imports a module named at run time",
    "pickle.load": "unpickling runs arbitrary code",
    "pickle.loads": "unpickling runs arbitrary code",
    "pickle.Unpickler": "unpickling runs arbitrary code",
    "marshal.loads": "loads code objects",
    "shelve.open": "shelve is pickle",
    "yaml.load": "yaml.load can build arbitrary objects (use safe_load)",
    "os.system": "runs a shell",
    "os.popen": "runs a shell",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


# The one module allowed to import pickle: core/intake.py subclasses pickle.Unpickler with a find_class
# that refuses every class (memory snapshots are pickles of plain data); it still may not call
# pickle.load/loads/Unpickler itself, and tests/core/test_intake.py shows os.system is refused.
# core/pickle_stream.py streams a large pickle through that same unpickler (it names pickle's error and
# opcodes, never calls it). core/workload/snapshot/recorder.py writes the user's own snapshot with pickle.dump
# (protocol 4, for older readers); writing runs nothing, and it reads nothing back.
PICKLE_IMPORT_ALLOWED = {"core/intake.py", "core/pickle_stream.py", "core/workload/snapshot/recorder.py"}


def _problems(path: Path) -> list[str]:
    """Forbidden calls anywhere; pickle-family imports only outside tests (tests build pickles to refuse)."""
    may_import_pickle = (
        path.relative_to(ROOT).parts[0] == "tests" or path.relative_to(ROOT).as_posix() in PICKLE_IMPORT_ALLOWED
    )
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            keywords = {k.arg: k.value for k in node.keywords}
            if name in FORBIDDEN_CALLS:
                found.append(f"{where}: {name}() — {FORBIDDEN_CALLS[name]}")
            if name.endswith("torch.load") and not (
                isinstance(keywords.get("weights_only"), ast.Constant) and keywords["weights_only"].value is True
            ):
                found.append(f"{where}: torch.load without weights_only=True unpickles")
            shell = keywords.get("shell")
            if isinstance(shell, ast.Constant) and shell.value is True:
                found.append(f"{where}: {name}(shell=True) hands text to a shell")
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not may_import_pickle:
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in ("pickle", "marshal", "shelve", "dill", "cloudpickle"):
                    found.append(f"{where}: imports {module}")
    return found


def test_sources_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"app.py", "core/store.py", "core/worker.py", "pages/home.py"} <= names


def test_nothing_is_evaluated_executed_or_unpickled():
    problems = [p for path in SOURCES if path.name != Path(__file__).name for p in _problems(path)]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_what_it_is_meant_to(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nx = eval(input())\nimport torch\ntorch.load('m.pt')\n"
        "import subprocess\nsubprocess.run('ls', shell=True)\n# eval( in a comment is fine\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        text = "\n".join(_problems(bad))
    finally:
        ROOT = saved
    for expected in ("imports pickle", "eval()", "torch.load without weights_only", "shell=True"):
        assert expected in text
    (tmp_path / "core").mkdir()
    intake = tmp_path / "core" / "intake.py"  # the allowed importer still may not unpickle by itself
    intake.write_text("import pickle\npickle.loads(b'')\n")
    saved, ROOT = ROOT, tmp_path
    try:
        text = "\n".join(_problems(intake))
    finally:
        ROOT = saved
    assert "pickle.loads()" in text and "imports pickle" not in text


def test_server_binds_localhost_by_default():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert config["server"].get("enableXsrfProtection", True) is True
    assert config["server"].get("enableCORS", True) is True
    assert config.get("browser", {}).get("gatherUsageStats") is False


def test_running_server_listens_on_loopback_only(data_dir):
    """Start the real server with no address flag: every listening socket it opens is on 127.0.0.1."""
    port = free_port()
    env = dict(os.environ, GPULAB_DATA_DIR=str(data_dir))
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not wait_healthy(f"http://127.0.0.1:{port}", 60, alive=lambda: server.poll() is None):
            pytest.fail("the dashboard did not answer its health check within 60 s")
        listening = [
            c.laddr for c in psutil.Process(server.pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN
        ]
        assert listening and {a.ip for a in listening} <= {"127.0.0.1"}, listening
    finally:
        server.terminate()
        server.wait(20)


def test_imports_refuse_pickles():
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(ImportRefused, match="pickle"):
            parse_runs_file(pickle.dumps({"format": "gpulab-runs", "runs": []}, protocol=protocol))


def test_imports_are_size_limited(monkeypatch, store, tmp_path):
    monkeypatch.setattr(store_module, "MAX_IMPORT_BYTES", 1024)
    big = json.dumps({"format": "gpulab-runs", "schema_version": 1, "runs": [], "pad": "x" * 2048}).encode()
    with pytest.raises(ImportRefused, match="larger than"):
        parse_runs_file(big)
    path = tmp_path / "big.json"
    path.write_bytes(big)
    with pytest.raises(ImportRefused, match="larger than the 1 KiB limit"):
        store.import_file(path)
    assert store.count() == 0


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,  # nesting deep enough to blow a recursive parser
        b'{"format": "gpulab-runs", "schema_version": 1, "runs": [NaN]}',
        b'{"format": "gpulab-runs", "schema_version": 1, "runs": [{"__class__": "os.system"}]}',
        b"__import__('os').system('true')",
        b"\xff\xfe\x00garbage",
    ],
)
def test_imports_are_strict_json(raw, store):
    with pytest.raises(ImportRefused):
        store.import_bytes(raw)
    assert store.count() == 0
