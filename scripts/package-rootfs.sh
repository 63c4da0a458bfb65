#!/usr/bin/env bash
# Prints the path of a cached minimal Debian root filesystem (a tar of a debootstrap minbase with
# systemd, and user `user` with passwordless sudo), building it first when it is missing.
# Used by test/image-nspawn.test.ts. Needs root and debootstrap.
#   ENVD_ROOTFS_CACHE  cache directory (default /var/cache/envd-test)
#   ENVD_ROOTFS_MIRROR Debian mirror (default: the one this machine's apt uses)
set -euo pipefail
SUITE=${ENVD_ROOTFS_SUITE:-bookworm}
CACHE=${ENVD_ROOTFS_CACHE:-/var/cache/envd-test}
PACKAGES=systemd,systemd-sysv,dbus,bash,coreutils,util-linux,ncurses-bin,ncurses-base,sudo,python3,procps
# The cache key changes with the package list and with the setup below (bump REV when editing it).
REV=1
KEY=$(printf '%s %s %s' "$SUITE" "$PACKAGES" "$REV" | sha256sum | cut -c1-10)
TAR="$CACHE/rootfs-$SUITE-$KEY.tar"

if [ -s "$TAR" ]; then
  echo "$TAR"
  exit 0
fi

# The Debian mirror apt is configured with (deb822 .sources or one-line .list), else deb.debian.org.
find_mirror() {
  local f line
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    line=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f" | grep -E '/debian/?$' | head -n1 || true)
    [ -n "$line" ] && { echo "$line"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    line=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) { print $i; break } }' "$f" \
      | grep -E '/debian/?$' | head -n1 || true)
    [ -n "$line" ] && { echo "$line"; return; }
  done
  echo "http://deb.debian.org/debian"
}
MIRROR=${ENVD_ROOTFS_MIRROR:-$(find_mirror)}

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/build.XXXXXX")
root="$work/root"
cleanup() {
  # debootstrap mounts proc/sys (and may bind /dev) inside the target; never delete through a mount.
  if [ -d "$root" ]; then
    awk -v r="$root" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

echo "building $SUITE root filesystem from $MIRROR (one-time, cached in $TAR)" >&2
bootstrap() { debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1; }
# One retry from scratch: a dropped download should not fail the test run.
if ! bootstrap; then
  echo "debootstrap failed; retrying once" >&2
  cleanup
  mkdir -p "$work"
  bootstrap || {
    tail -n 40 "$work/debootstrap.log" >&2
    tail -n 40 "$root/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    exit 1
  }
fi

# The image's user, as in E2B templates: `user` with /home/user, bash and passwordless sudo.
chroot "$root" useradd -m -s /bin/bash user
echo 'user ALL=(ALL) NOPASSWD:ALL' > "$root/etc/sudoers.d/user"
chmod 440 "$root/etc/sudoers.d/user"
# Fast, quiet boots: no consoles to log in on and nothing that waits for a network.
chroot "$root" systemctl mask getty@tty1.service console-getty.service serial-getty@.service \
  systemd-networkd-wait-online.service >/dev/null 2>&1 || true
chroot "$root" apt-get clean >/dev/null 2>&1 || true
echo envd-image > "$root/etc/hostname"

tar -C "$root" --numeric-owner -cf "$TAR.tmp" . && mv "$TAR.tmp" "$TAR"
# Older variants of this root filesystem are of no further use.
find "$CACHE" -maxdepth 1 -name "rootfs-$SUITE*.tar" ! -path "$TAR" -delete
echo "$TAR"
