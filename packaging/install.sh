#!/bin/sh
# Installs envd from this unpacked tarball: /usr/bin/envd, its native addons in /usr/lib/envd,
# the unit /usr/lib/systemd/system/envd.service, and enables it. Re-running it upgrades in place.
#   ./install.sh                 install into this system; restarts envd if it is running
#   ./install.sh --root DIR      install into a root filesystem (image build, chroot, rootfs dir)
#   --no-enable                  do not enable the unit
#   --start                      (no --root) also start it now when systemd is running
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
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$ROOT" ]; then
  [ -d "$ROOT" ] || { echo "install.sh: $ROOT is not a directory" >&2; exit 2; }
  ROOT=$(cd "$ROOT" && pwd)
  [ "$ROOT" = / ] && ROOT=
fi
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$HERE/envd" ] || { echo "install.sh: no envd executable beside this script" >&2; exit 1; }

BIN="$ROOT/usr/bin"
LIB="$ROOT/usr/lib/envd"
UNITDIR="$ROOT/usr/lib/systemd/system"
mkdir -p "$BIN" "$ROOT/usr/lib" "$UNITDIR"

# Addons: staged in a sibling dir, then swapped in with renames (a running envd keeps its mapped copies).
rm -rf "$LIB.new" "$LIB.old"
mkdir -p "$LIB.new"
for f in inotify.node xattr.node; do
  if [ -f "$HERE/$f" ]; then cp "$HERE/$f" "$LIB.new/$f"; fi
done
cp -R "$HERE/node_modules" "$LIB.new/node_modules"
cp "$HERE/VERSION" "$LIB.new/VERSION" 2>/dev/null || true
chmod -R u=rwX,go=rX "$LIB.new"
if [ -d "$LIB" ]; then mv "$LIB" "$LIB.old"; fi
mv "$LIB.new" "$LIB"
rm -rf "$LIB.old"

# The executable: written beside, then renamed over (no "text file busy" while the old one runs).
cp "$HERE/envd" "$BIN/.envd.new"
chmod 755 "$BIN/.envd.new"
mv -f "$BIN/.envd.new" "$BIN/envd"

cp "$HERE/envd.service" "$UNITDIR/envd.service.new"
chmod 644 "$UNITDIR/envd.service.new"
mv -f "$UNITDIR/envd.service.new" "$UNITDIR/envd.service"

running_systemd() { [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

if [ "$ENABLE" = 1 ]; then
  if running_systemd; then
    systemctl daemon-reload
    systemctl enable envd.service
  elif command -v systemctl >/dev/null 2>&1 && systemctl --root="${ROOT:-/}" enable envd.service >/dev/null 2>&1; then
    :
  else
    # What `systemctl enable` does for WantedBy=multi-user.target (no systemctl, e.g. a bare rootfs).
    mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
    ln -sf /usr/lib/systemd/system/envd.service "$ROOT/etc/systemd/system/multi-user.target.wants/envd.service"
  fi
fi

if running_systemd; then
  if [ "$ENABLE" != 1 ]; then systemctl daemon-reload; fi
  if systemctl is-active --quiet envd.service; then
    systemctl restart envd.service
  elif [ "$START" = 1 ]; then
    systemctl start envd.service
  fi
fi
echo "envd $(cat "$HERE/VERSION" 2>/dev/null || echo '') installed into ${ROOT:-/}"
