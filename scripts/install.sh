#!/usr/bin/env bash
# Install what GPU Lab needs, at the versions CI passed with (requirements.lock, used as constraints).
# `--test` adds the test tools and Debian's Chromium (browser tests, server-side PNG/SVG export).
# torch is not in the lock and is installed only when none is importable, so a GPU box keeps its CUDA
# build; elsewhere torch==2.13.0 is taken (the CPU build on the lab's CI machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# find_spec, not import: importing torch alone takes seconds, and this runs before every launch
have() { "$PY" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in sys.argv[1:]))" "$@"; }
# A stock Debian/Ubuntu system Python is "externally managed" (PEP 668): pip refuses to install into it. There the
# lab's packages go to the user's site-packages (~/.local), which that Python reads; a venv or conda env is used as is.
PIP_WHERE=()
if "$PY" -c 'import os, sys, sysconfig; sys.exit(not (sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))'; then
  PIP_WHERE=(--user --break-system-packages)
  echo "install: $("$PY" -c 'import sys; print(sys.executable)') is the system's (externally managed): installing into your user site-packages (~/.local) for it; a virtual environment keeps the lab apart" >&2
fi
if ! have pip; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "install: this Python has no pip; installing Debian's python3-pip (apt-get)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
  else
    echo "error: $PY has no pip: install it (Debian/Ubuntu: sudo apt-get install python3-pip) and run this again" >&2
    exit 2
  fi
fi
if ! have torch; then
  "$PY" -m pip install --quiet ${PIP_WHERE[@]+"${PIP_WHERE[@]}"} "torch==2.13.0"
fi
# pip runs only when the requirements, the lock or this Python changed since it last succeeded (a stamp of them
# under .gl/), or when a package the mode needs does not import: a launch with nothing to do costs well under 1 s.
MODE=${1:---run}
NEEDS="streamlit plotly pandas numpy psutil msgspec"
[ "$MODE" = "--test" ] && NEEDS="$NEEDS pytest xdist hypothesis playwright importlinter"
STAMP=.gl/install-${MODE#--}.stamp
WANT=$(cat requirements.txt requirements-dev.txt requirements.lock | "$PY" -c \
  "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read() + sys.executable.encode() + sys.version.encode()).hexdigest())")
# shellcheck disable=SC2086 # NEEDS is a list of words
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! have $NEEDS; then
  if [ "$MODE" = "--test" ]; then
    "$PY" -m pip install --quiet ${PIP_WHERE[@]+"${PIP_WHERE[@]}"} -r requirements-dev.txt -c requirements.lock
  else
    "$PY" -m pip install --quiet ${PIP_WHERE[@]+"${PIP_WHERE[@]}"} -r requirements.txt -c requirements.lock
  fi
  mkdir -p .gl && echo "$WANT" > "$STAMP"
fi
# The lab's bytecode, compiled once as an installed package's is: each command and worker then starts without
# compiling its modules again (where PYTHONDONTWRITEBYTECODE is set, or the checkout is read-only, it would).
"$PY" -m compileall -q core render pages app.py >/dev/null
# Chromium: kaleido renders PNG/SVG with it; the e2e tests drive it. Optional for the dashboard.
if ! command -v chromium >/dev/null 2>&1 && { [ "${1:-}" = "--test" ] || [ "${GPULAB_INSTALL_CHROMIUM:-0}" = 1 ]; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "install: Debian's chromium (apt-get, system-wide) for the browser tests and PNG/SVG export" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; image export falls back to the browser, e2e tests skip" >&2
  else
    echo "warning: no chromium, and installing it needs root (sudo apt-get install chromium): the browser tests skip and PNG/SVG export falls back to the browser's own" >&2
  fi
fi
