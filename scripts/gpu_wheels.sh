#!/usr/bin/env bash
# Download into .whl/ (git-ignored) the wheels a GPU box without internet lacks to run the dashboard and the whole
# test suite there: the cp312 manylinux x86_64 builds of what GPU Lab needs beyond the box's own engine packages,
# at the versions of requirements.lock. Run it where pip reaches the internet, copy .whl/ to the box, and there:
#
#   python3 -m pip install --upgrade --no-index --no-deps --target "$PWD/.gl/site-packages" .whl/*.whl
#   export PYTHONPATH="$PWD/.gl/site-packages"      # .gl/ is git-ignored too
#
# The target's path must contain "site-packages": Streamlit takes a copy of itself outside one for a development
# checkout (global.developmentMode), and the page tests then fail ("server.port does not work when
# global.developmentMode is true").
#
# The box already has streamlit's and plotly's other import-time needs (click, packaging, pillow, protobuf,
# pyarrow, requests, typing-extensions, anyio >= 4, jinja2, numpy, pandas). Left out on purpose: altair and pydeck
# (with jsonschema, referencing, rpds-py): Streamlit imports them only inside st.altair_chart/st.line_chart/…
# and st.pydeck_chart/st.map, which no page calls, and pydeck alone is 11 MB.
#
# Idempotent: a wheel already in .whl/ at its locked version, for this Python and CPU, is kept (no network
# needed); another version or build of the same package is removed. Prints each wheel with its size and the
# total; exits 1 naming what failed.
# Another Python or CPU: GPU_WHEELS_PYTHON_VERSION=3.11, GPU_WHEELS_ARCH=aarch64.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=.whl
PYVER=${GPU_WHEELS_PYTHON_VERSION:-3.12}
ARCH=${GPU_WHEELS_ARCH:-x86_64}
PACKAGES=(
  msgspec        # profiler trace decoding (core/workload/trace/file.py)
  streamlit      # the dashboard, and AppTest for the page tests
  plotly         # every chart
  narwhals       # plotly's dataframe layer
  starlette      # streamlit's server
  uvicorn
  python-multipart
  websockets
  itsdangerous
  watchdog
  h11            # uvicorn's HTTP/1.1; the box has one, this is the locked version
)

locked() { # the version requirements.lock pins for a package, or nothing
  sed -n "s/^$1==\([^ ;#]*\).*/\1/p" requirements.lock
}

wheel_name() { # a distribution's name as wheel files spell it: lower case, runs of -_. as one _
  echo "$1" | tr '[:upper:]' '[:lower:]' | sed 's/[-_.]\+/_/g'
}

fits() { # a wheel file at VERSION built for this Python and CPU: NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl
  local file version=$2 tags python platform
  file=$(basename "$1" .whl)
  [ "$(echo "$file" | cut -d- -f2)" = "$version" ] || return 1
  tags=$(echo "$file" | rev | cut -d- -f1-3 | rev)
  python=${tags%%-*}
  platform=${tags##*-}
  case ".$python." in *.py3.* | *.cp${PYVER/./}.*) ;; *) return 1 ;; esac
  case "$platform" in any | *"$ARCH"*) return 0 ;; *) return 1 ;; esac
}

mkdir -p "$DEST"
failed=()
for pkg in "${PACKAGES[@]}"; do
  version=$(locked "$pkg")
  if [ -z "$version" ]; then
    failed+=("$pkg (not pinned in requirements.lock)")
    continue
  fi
  stem=$(wheel_name "$pkg")
  have=0
  for whl in "$DEST/$stem"-*.whl; do # another version left by an earlier lock, or a build for another Python
    [ -e "$whl" ] || continue
    if fits "$whl" "$version"; then
      have=1
    else
      rm -f "$whl" && echo "removed $whl (not $version for cp${PYVER/./} $ARCH)"
    fi
  done
  [ "$have" = 1 ] && continue
  if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp \
    --platform "manylinux_2_28_$ARCH" --platform "manylinux_2_17_$ARCH" --platform "manylinux2014_$ARCH" \
    --platform any -d "$DEST" "$pkg==$version" 2>"$DEST/.pip-$stem.log"; then
    why=$(grep -m1 ERROR "$DEST/.pip-$stem.log" || tail -1 "$DEST/.pip-$stem.log")
    failed+=("$pkg==$version (pip download: $why)")
  elif ! compgen -G "$DEST/$stem-$version-*.whl" >/dev/null; then
    failed+=("$pkg==$version (pip saved no wheel named $stem-$version-*.whl)")
  fi
  rm -f "$DEST/.pip-$stem.log"
done

# An optional GPU extra, not in the lock: torchao for FP8 training (core/transformer/training.py, to_float8); 0.18
# is the release built for the GPU box's torch 2.11. Without it FP8 reads "unsupported … torchao is not installed".
EXTRAS=(torchao==0.18.0)
for spec in "${EXTRAS[@]}"; do
  compgen -G "$DEST/$(wheel_name "${spec%%==*}")-${spec##*==}-*.whl" >/dev/null && continue
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform "manylinux_2_28_$ARCH" --platform "manylinux_2_24_$ARCH" -d "$DEST" "$spec" \
    || echo "warning: $spec not downloaded: FP8 training will read unsupported on the box" >&2
done

total=0
count=0
for pkg in "${PACKAGES[@]}" "${EXTRAS[@]}"; do
  version=$(locked "$pkg")
  [ "$pkg" != "${pkg%%==*}" ] && version=${pkg##*==} && pkg=${pkg%%==*}
  for whl in "$DEST/$(wheel_name "$pkg")-$version-"*.whl; do
    [ -e "$whl" ] || continue
    size=$(stat -c %s "$whl")
    total=$((total + size))
    count=$((count + 1))
    awk -v b="$size" -v n="$(basename "$whl")" 'BEGIN { printf "%9.1f KiB  %s\n", b / 1024, n }'
  done
done
awk -v b="$total" -v n="$count" -v d="$DEST" -v t="cp${PYVER/./} manylinux $ARCH" \
  'BEGIN { printf "%9.1f MiB  total: %d wheels in %s/ (%s)\n", b / 1048576, n, d, t }'
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "on the GPU box, in this checkout:"
echo "  python3 -m pip install --upgrade --no-index --no-deps --target \"\$PWD/.gl/site-packages\" $DEST/*.whl"
echo "  export PYTHONPATH=\"\$PWD/.gl/site-packages\""
