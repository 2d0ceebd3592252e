"""The install is reproducible: requirements.lock pins everything the requirements name (except torch,
which a GPU box keeps as its own CUDA build), and this environment runs exactly the pinned versions."""

import re
from importlib import metadata

from tests.conftest import ROOT

NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            names |= _names(path.parent / line[3:].strip())
            continue
        names.add(_canonical(NAME.match(line).group(1)))
    return names


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_canonical(name)] = version.strip()
    return pins


def test_the_lock_pins_every_requirement_but_torch():
    wanted = _names(ROOT / "requirements-dev.txt")
    pins = _lock()
    assert "torch" in wanted and "torch" not in pins
    assert wanted - {"torch"} <= set(pins), sorted(wanted - {"torch"} - set(pins))


def test_the_installer_and_the_image_use_the_lock():
    assert "-c requirements.lock" in (ROOT / "scripts" / "install.sh").read_text()
    assert "-c requirements.lock" in (ROOT / "Dockerfile").read_text()


def test_this_environment_runs_the_pinned_versions():
    drift = {}
    for name, version in _lock().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency of another platform or Python (the lock is resolved for CI's)
        if installed != version:
            drift[name] = (installed, version)
    assert not drift, f"installed vs locked: {drift}; run scripts/install.sh, or scripts/lock.sh after a green CI"


def _installer(tmp_path, externally_managed: bool = False):
    """A copy of the installer's files and a Python standing in for the real one: it logs every pip call instead of
    running it, and answers the installer's own question (is it externally managed?) as told. Returns the launch
    (its stderr) and the log's lines."""
    import os
    import shutil
    import subprocess
    import sys

    for name in ("requirements.txt", "requirements-dev.txt", "requirements.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    for folder in ("core", "render", "pages"):
        (tmp_path / folder).mkdir()
    (tmp_path / "app.py").write_text("")
    log = tmp_path / "pip.log"
    python = tmp_path / "python"
    # answered either way, never by the real Python (Debian's own is externally managed: its venv answer differs)
    answer = f'case "$2" in *EXTERNALLY-MANAGED*) exit {0 if externally_managed else 1};; esac\n'
    python.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && {{ echo "$*" >> {log}; exit 0; }}\n{answer}exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)

    def launch() -> tuple[str, list[str]]:
        env = os.environ | {"PYTHON": str(python)}
        done = subprocess.run(["bash", "scripts/install.sh"], cwd=tmp_path, env=env, check=True, capture_output=True)
        return done.stderr.decode(), log.read_text().splitlines() if log.exists() else []

    return launch


def test_a_launch_with_nothing_to_install_runs_no_pip(tmp_path):
    """The launch command installs on the first run and after the requirements change, never in between (pip
    alone took ~10 s per launch)."""
    launch = _installer(tmp_path)
    assert launch()[1] == ["-m pip install --quiet -r requirements.txt -c requirements.lock"]  # no stamp yet
    assert len(launch()[1]) == 1  # the stamp matches: no pip
    with (tmp_path / "requirements.txt").open("a") as f:
        f.write("# changed\n")
    assert len(launch()[1]) == 2  # the requirements changed: pip again


def test_a_stock_system_python_installs_for_its_user_and_says_so(tmp_path):
    """Debian 12's and Ubuntu 24.04's system Python is externally managed (PEP 668) and pip refuses it outright; the
    installer then installs into the user's site-packages, which that Python reads, and says so."""
    said, pip = _installer(tmp_path, externally_managed=True)()
    assert pip == ["-m pip install --quiet --user --break-system-packages -r requirements.txt -c requirements.lock"]
    assert "externally managed): installing into your user site-packages (~/.local)" in said
