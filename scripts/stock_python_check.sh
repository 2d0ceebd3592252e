#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 with only its system Python (externally managed, no pip, no
# venv made by hand): a minimal Debian root is made with debootstrap, this checkout is cloned into it, and the
# first command must bring up a healthy dashboard, the second a green suite. Needs root and debootstrap; the
# machine's pip settings (its index, certificates, local wheels) are carried in so the root reaches the packages
# this machine does. A log of each command is left beside the root.
#
#   sudo bash scripts/stock_python_check.sh [/tmp/gpulab-stock] [pytest args for the second command's run]
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/gpulab-stock}
shift || true
BASE=$WORK/base  # debootstrap's root, kept as it came; each check runs in a fresh copy of it
ROOTFS=$WORK/root
[ "$(id -u)" = 0 ] || { echo "error: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "error: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
mkdir -p "$WORK"
if [ ! -x "$BASE/usr/bin/apt-get" ]; then
  debootstrap --variant=minbase bookworm "$BASE" http://deb.debian.org/debian >"$WORK/debootstrap.log"
fi
rm -rf "$ROOTFS" && cp -a "$BASE" "$ROOTFS"
# the machine's pip and apt settings, so the root reaches what this machine reaches, and its hosts file: an
# installed Debian names its own host there, which debootstrap leaves out (gloo's rendezvous looks the name up)
for f in /etc/pip.conf /etc/xdg/pip "$HOME/.config/pip" /etc/ssl/certs/ca-certificates.crt /etc/resolv.conf /etc/hosts; do
  [ -e "$f" ] && mkdir -p "$ROOTFS$(dirname "$f")" && cp -rL "$f" "$ROOTFS$(dirname "$f")/"
done
# the machine's certificates apart too: Debian's ca-certificates package, installed in the root, rewrites its bundle
[ -e "${PIP_CERT:-}" ] && cp -L "$PIP_CERT" "$ROOTFS/etc/host-ca.crt"
rm -rf "$ROOTFS/root/gpulab" && git clone -q "$HERE" "$ROOTFS/root/gpulab"
README_LINES=$(sed -n '/^```bash$/,/^```$/p' "$HERE/README.md" | sed '1d;$d' | sed 's/ *#.*$//')
LAUNCH=$(sed -n 1p <<<"$README_LINES")
TESTS=$(sed -n 2p <<<"$README_LINES")
cat >"$ROOTFS/root/check.sh" <<EOF
set -u
export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
export PIP_FIND_LINKS=${PIP_FIND_LINKS:-} PIP_DEFAULT_TIMEOUT=180
[ -e /etc/host-ca.crt ] && export PIP_CERT=/etc/host-ca.crt
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 curl git procps >/dev/null
# the machine's certificates in the root's trust store, as an administrator behind a TLS proxy adds them: Debian's
# pip (python3-pip, which the first command installs) failed to verify the index with PIP_CERT alone
[ -e /etc/host-ca.crt ] && cp /etc/host-ca.crt /usr/local/share/ca-certificates/ && update-ca-certificates >/dev/null
echo "system Python: \$(command -v python3) \$(python3 -V 2>&1); pip: \$(python3 -m pip -V 2>&1 | head -1)"
cd /root/gpulab
( $LAUNCH ) >/root/launch.log 2>&1 &
for _ in \$(seq 1 900); do
  [ "\$(curl -s http://127.0.0.1:8501/_stcore/health)" = ok ] && break
  sleep 1
done
echo "dashboard health: \$(curl -s http://127.0.0.1:8501/_stcore/health || echo unreachable)"
pkill -f "streamlit run app.py" || true
$TESTS $* >/root/tests.log 2>&1
echo "tests: exit \$?, \$(tail -1 /root/tests.log)"
EOF
# local package folders the pip settings name (find-links, file:// indexes), read-only
BINDS=$(grep -rhoE '(/opt|/srv)/[A-Za-z0-9._/-]+' /etc/pip.conf /etc/xdg/pip "$HOME/.config/pip" 2>/dev/null | sed 's#/simple$##' | sort -u)
BINDS=$(printf "%s\n" $BINDS ${PIP_FIND_LINKS:-} | sort -u)
MOUNTS="mount -t proc proc '$ROOTFS/proc' && mount --rbind /sys '$ROOTFS/sys' && mount --rbind /dev '$ROOTFS/dev'"
MOUNTS="$MOUNTS && mount -t tmpfs tmpfs '$ROOTFS/tmp'"
for d in $BINDS; do
  [ -d "$d" ] && mkdir -p "$ROOTFS$d" && MOUNTS="$MOUNTS && mount --bind -o ro '$d' '$ROOTFS$d'"
done
unshare --mount --propagation private sh -c "$MOUNTS && chroot '$ROOTFS' bash /root/check.sh"
cp "$ROOTFS/root/launch.log" "$ROOTFS/root/tests.log" "$WORK/" 2>/dev/null || true
