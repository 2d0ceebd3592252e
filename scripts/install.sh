#!/usr/bin/env bash
# Install what GPU Lab needs, at the versions CI passed with (requirements.lock, used as constraints).
# `--test` adds the test tools and Debian's Chromium (browser tests, server-side PNG/SVG export).
# torch is not in the lock and is installed only when none is importable, so a GPU box keeps its CUDA
# build; elsewhere torch==2.13.0 is taken (the CPU build on the lab's CI machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
if [ "${1:-}" = "--test" ]; then
  "$PY" -m pip install --quiet -r requirements-dev.txt -c requirements.lock
else
  "$PY" -m pip install --quiet -r requirements.txt -c requirements.lock
fi
# The lab's bytecode, compiled once as an installed package's is: each command and worker then starts without
# compiling its modules again (where PYTHONDONTWRITEBYTECODE is set, or the checkout is read-only, it would).
"$PY" -m compileall -q core render pages app.py >/dev/null
# Chromium: kaleido renders PNG/SVG with it; the e2e tests drive it. Optional for the dashboard.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  if [ "${1:-}" = "--test" ] || [ "${GPULAB_INSTALL_CHROMIUM:-0}" = 1 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; image export falls back to the browser, e2e tests skip" >&2
  fi
fi
