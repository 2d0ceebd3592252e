#!/usr/bin/env bash
# Regenerate requirements.lock: the exact versions of everything requirements-dev.txt pulls in, except
# torch, as installed in this environment. Run it after a green `bash .ci/run`, so the lock holds the
# versions CI passed with. torch stays out: a GPU box keeps its own CUDA build (scripts/install.sh).
# Needs uv (pip install uv); the lab itself never does.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -viE '^torch([^a-z_-]|$)' requirements.txt > "$tmp/requirements.txt"
sed "s#^-r requirements.txt#-r $tmp/requirements.txt#" requirements-dev.txt > "$tmp/requirements-dev.txt"
"$PY" -m pip freeze --exclude-editable | grep -viE '^torch==' > "$tmp/installed.txt"
"$PY" -m uv pip compile "$tmp/requirements-dev.txt" --constraint "$tmp/installed.txt" \
  --python-version "$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  --no-header --no-annotate --quiet --output-file "$tmp/lock.txt"
{
  echo "# The versions CI last passed with, for everything GPU Lab installs except torch."
  echo "# Used as pip constraints by scripts/install.sh; regenerate with: bash scripts/lock.sh"
  cat "$tmp/lock.txt"
} > requirements.lock
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) pins)"
