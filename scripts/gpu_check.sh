#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): every CUDA path of the lab on the box at hand, in one command.
#   bash scripts/gpu_check.sh [--device cuda|cuda:N|cpu] [--only STEP,...] [--budget-s 480] [--tiny] [--out DIR]
# On a box that lacks the dashboard's packages (msgspec, plotly, streamlit…), the wheels that scripts/gpu_wheels.sh put in .whl/ are
# installed first, with no index and no dependencies, into a folder whose path contains "site-packages"
# (elsewhere Streamlit takes the folder for a development checkout and its page tests fail).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${GPULAB_CHECK_SITE:-${TMPDIR:-/tmp}/gpulab-check/site-packages}
if compgen -G ".whl/*.whl" >/dev/null && ! "$PY" -c "import msgspec, plotly, streamlit" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "error: the wheels in .whl/ did not install into $SITE" >&2; exit 2; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" -m compileall -q core render pages scripts >/dev/null 2>&1 || true  # workers then start without compiling
exec "$PY" scripts/gpu_check.py "$@"
