#!/usr/bin/env bash
# Install what GPU Lab needs. `--test` adds the test tools.
# torch is installed only when none is importable, so a GPU box keeps its CUDA build; on a machine
# without torch, torch==2.13.0 is taken (a CPU build on the lab's CI machines, CUDA from PyPI elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
if [ "${1:-}" = "--test" ]; then
  "$PY" -m pip install --quiet -r requirements-dev.txt
else
  "$PY" -m pip install --quiet -r requirements.txt
fi
