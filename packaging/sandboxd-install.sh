#!/bin/sh
# Installs sandboxd from this unpacked release tarball: the release into /usr/lib/sandboxd (its
# Node, bundle, dashboard and envd), /usr/bin/sandboxd, the unit
# /usr/lib/systemd/system/sandboxd.service, and enables it. Re-running it upgrades in place.
#   ./install.sh                 install into this system; restarts sandboxd if it is running
#   ./install.sh --root DIR      install into a root filesystem (image build, chroot, rootfs dir)
#   --no-enable                  do not enable the unit
#   --start                      (no --root) also start it now when systemd is running
# Run `sandboxd setup` first on a new machine: it installs the Debian packages sandboxd needs.
set -eu

ROOT=
ENABLE=1
START=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root) [ $# -ge 2 ] || { echo "install.sh: --root needs a directory" >&2; exit 2; }; ROOT=$2; shift 2 ;;
    --root=*) ROOT=${1#--root=}; shift ;;
    --no-enable) ENABLE=0; shift ;;
    --start) START=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$ROOT" ]; then
  [ -d "$ROOT" ] || { echo "install.sh: $ROOT is not a directory" >&2; exit 2; }
  ROOT=$(cd "$ROOT" && pwd)
  [ "$ROOT" = / ] && ROOT=
fi
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$HERE/sandboxd" ] && [ -x "$HERE/lib/node" ] || { echo "install.sh: no sandboxd release beside this script" >&2; exit 1; }

LIB="$ROOT/usr/lib/sandboxd"
UNITDIR="$ROOT/usr/lib/systemd/system"
mkdir -p "$ROOT/usr/bin" "$ROOT/usr/lib" "$UNITDIR"

# The release: staged in a sibling dir, then swapped in with renames (a running sandboxd keeps its open files).
rm -rf "$LIB.new" "$LIB.old"
mkdir -p "$LIB.new"
for f in sandboxd lib envd VERSION; do cp -R "$HERE/$f" "$LIB.new/$f"; done
chmod -R u=rwX,go=rX "$LIB.new"
if [ -d "$LIB" ]; then mv "$LIB" "$LIB.old"; fi
mv "$LIB.new" "$LIB"
rm -rf "$LIB.old"
ln -sfn /usr/lib/sandboxd/sandboxd "$ROOT/usr/bin/sandboxd"

cp "$HERE/sandboxd.service" "$UNITDIR/sandboxd.service.new"
chmod 644 "$UNITDIR/sandboxd.service.new"
mv -f "$UNITDIR/sandboxd.service.new" "$UNITDIR/sandboxd.service"

running_systemd() { [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

if [ "$ENABLE" = 1 ]; then
  if running_systemd; then
    systemctl daemon-reload
    systemctl enable sandboxd.service
  elif command -v systemctl >/dev/null 2>&1 && systemctl --root="${ROOT:-/}" enable sandboxd.service >/dev/null 2>&1; then
    :
  else
    # What `systemctl enable` does for WantedBy=multi-user.target (no systemctl, e.g. a bare rootfs).
    mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
    ln -sf /usr/lib/systemd/system/sandboxd.service "$ROOT/etc/systemd/system/multi-user.target.wants/sandboxd.service"
  fi
fi

if running_systemd; then
  if [ "$ENABLE" != 1 ]; then systemctl daemon-reload; fi
  if systemctl is-active --quiet sandboxd.service; then
    systemctl restart sandboxd.service
  elif [ "$START" = 1 ]; then
    systemctl start sandboxd.service
  fi
fi
echo "sandboxd $(cat "$HERE/VERSION" 2>/dev/null || echo '') installed into ${ROOT:-/}"
