#!/usr/bin/env bash
# A minimal Debian root (`debootstrap --variant=minbase bookworm`, Debian 12: what a new user's machine has
# before `make deps`; or bullseye, Debian 11 with glibc 2.31, with FRESH_SUITE=bullseye), and commands run inside
# it with chroot. `make test-fresh` uses it to run `make test` and `make run` from a clone; `make
# test-gpu-bundle` runs the GPU bundle in a Debian 11 one; any test that must run on a bare system can use it
# the same way.
#
#   tests/fresh/root.sh build                  unpack a pristine root into $FRESH_ROOT (replacing one left there);
#                                              the first build runs debootstrap and caches the result in
#                                              $FRESH_TARBALL, later builds only unpack it (seconds)
#   tests/fresh/root.sh run [--cwd DIR] CMD... run CMD inside the root as root (cwd DIR, default /) with a clean
#                                              environment; exits with CMD's status. /proc, /sys with its
#                                              submounts (cgroups) and /dev (read-only binds), a private
#                                              /dev/pts and /dev/shm are mounted for the command and unmounted
#                                              after it, also when it fails or this script is interrupted;
#                                              processes CMD left running inside the root are killed first
#                                              (with a warning)
#   tests/fresh/root.sh path                   print the root's directory (copy files in through it)
#   tests/fresh/root.sh cleanup                kill what still runs inside the root, unmount everything below it,
#                                              delete it (the tarball stays)
#
# The root is debootstrap's minbase plus what an installed Debian has and debootstrap does not write:
# /etc/hosts (localhost and this host's name, as the Debian installer writes it) and APT sources for the
# mirror this machine uses (SUITE, SUITE-updates, SUITE-security, read with `apt-get indextargets`; for a suite
# this machine has no source of, its own release's mirror, which carries the other releases too)
# with this machine's Acquire:: settings (e.g. Check-Valid-Until for a snapshot mirror, proxies). It also
# has this machine's local CA certificates and /etc/pip.conf (for PyPI behind a TLS-inspecting proxy), and
# /usr/sbin/policy-rc.d refusing to start services: packages installed in a chroot must not start
# daemons (munged, slurmctld) that would outlive the command, hold the mounts and listen on the host's ports.
# No package beyond minbase is installed.
#
# Environment:
#   FRESH_DIR      where the tarball and the root live (default build/fresh, relative to the current directory)
#   FRESH_ROOT     the root (default $FRESH_DIR/root)
#   FRESH_SUITE    bookworm (default, Debian 12) or bullseye (Debian 11)
#   FRESH_TARBALL  the cached debootstrap result (default $FRESH_DIR/debian12-minbase.tar.gz, for bullseye
#                  debian11-minbase.tar.gz; delete it to debootstrap again)
#   FRESH_MIRROR   the Debian mirror for debootstrap and the root's APT (default: this machine's, see above)
#   FRESH_ENV      extra VAR=value words added to the command's environment, e.g. "MAKEFLAGS=-j2"
# Needs root, debootstrap, tar, gzip, mount and chroot; the network namespace is the host's (loopback
# servers started inside are reachable from outside and bind the host's ports).
set -euo pipefail

FRESH_DIR=${FRESH_DIR:-build/fresh}
FRESH_ROOT=${FRESH_ROOT:-$FRESH_DIR/root}
SUITE=${FRESH_SUITE:-bookworm}
case $SUITE in
  bookworm) RELEASE=12 ;;
  bullseye) RELEASE=11 ;;
  *) echo "root.sh: FRESH_SUITE=$SUITE: only bookworm (Debian 12) and bullseye (Debian 11) are supported" >&2; exit 2 ;;
esac
FRESH_TARBALL=${FRESH_TARBALL:-$FRESH_DIR/debian$RELEASE-minbase.tar.gz}

die() { echo "root.sh: $*" >&2; exit 1; }

# Absolute paths: mounts, chroot and /proc/PID/root compare against them.
abspath() { mkdir -p "$(dirname "$1")" && echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
FRESH_ROOT=$(abspath "$FRESH_ROOT")
FRESH_TARBALL=$(abspath "$FRESH_TARBALL")

need_root() { [[ $(id -u) == 0 ]] || die "must run as root (debootstrap, mount and chroot need it)"; }

# URI of this machine's APT source for a release (e.g. bookworm-security), empty if it has none.
host_repo() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 2>/dev/null |
    awk -v r="$1" '$2 == r && $3 == "main" { print $1; exit }'
}

# This machine's own release (e.g. bookworm), whose mirror and security mirror serve the other releases too.
host_suite() { (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}"); }

mirror() {
  local m=${FRESH_MIRROR:-$(host_repo $SUITE)}
  [[ -n $m ]] || m=$(host_repo "$(host_suite)")
  echo "${m:-http://deb.debian.org/debian/}"
}

security_mirror() {
  local m
  m=$(host_repo $SUITE-security)
  [[ -n $m ]] || m=$(host_repo "$(host_suite)-security")
  echo "$m"
}

# What an installed system has beyond debootstrap's result; see the header.
configure_root() {
  local r=$1 m sec
  m=$(mirror)
  sec=$(security_mirror)
  {
    echo "deb $m $SUITE main"
    echo "deb $m $SUITE-updates main"
    [[ -z $sec ]] || echo "deb $sec $SUITE-security main"
  } >"$r/etc/apt/sources.list"
  apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy|ftp::Proxy) ' \
    >"$r/etc/apt/apt.conf.d/90host-mirror" || true
  # This machine's network trust for PyPI (the TensorBoard test installs its reader with pip once): local CA
  # certificates, which the root's ca-certificates package adds to its bundle when a test installs it, and
  # pip's global configuration. Like the APT proxy settings above, a machine with direct access needs none.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$r/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/"
  fi
  [[ ! -f /etc/pip.conf ]] || cp /etc/pip.conf "$r/etc/pip.conf"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" \
    >"$r/etc/hosts"
  printf '#!/bin/sh\n# Installed by tests/fresh/root.sh: no service starts inside this chroot.\nexit 101\n' \
    >"$r/usr/sbin/policy-rc.d"
  chmod 755 "$r/usr/sbin/policy-rc.d"
}

make_tarball() {
  local stage=$FRESH_TARBALL.stage m
  m=$(mirror)
  rm -rf "$stage"
  echo "root.sh: debootstrap --variant=minbase $SUITE from $m (once; cached in $FRESH_TARBALL)" >&2
  debootstrap --variant=minbase "$SUITE" "$stage" "$m" >&2 ||
    die "debootstrap of $SUITE from $m failed (does the mirror serve $SUITE? FRESH_MIRROR picks another);" \
      "its log: $stage/debootstrap/debootstrap.log"
  configure_root "$stage"
  rm -rf "$stage"/var/cache/apt/archives/*.deb "$stage"/var/lib/apt/lists/*
  tar -C "$stage" --numeric-owner -czf "$FRESH_TARBALL.tmp" .
  mv "$FRESH_TARBALL.tmp" "$FRESH_TARBALL"
  rm -rf "$stage"
}

cmd_build() {
  need_root
  command -v debootstrap >/dev/null || die "debootstrap is not installed (make test-fresh installs it)"
  [[ -s $FRESH_TARBALL ]] || make_tarball
  cmd_cleanup
  mkdir -p "$FRESH_ROOT"
  tar -C "$FRESH_ROOT" --numeric-owner -xzf "$FRESH_TARBALL"
  configure_root "$FRESH_ROOT"  # this machine's current settings, also for a tarball cached before they changed
  echo "root.sh: pristine Debian $RELEASE ($SUITE) minbase root in $FRESH_ROOT" >&2
}

# Mount points below the root, deepest first.
mounts_below_root() {
  awk -v r="$FRESH_ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# Processes whose root directory is inside the root: only what this script started there.
pids_inside() {
  local p root
  for p in /proc/[0-9]*; do
    root=$(readlink "$p/root" 2>/dev/null) || continue
    [[ $root == "$FRESH_ROOT" || $root == "$FRESH_ROOT"/* ]] && echo "${p#/proc/}"
  done
  return 0
}

kill_inside() {
  local pids pid
  pids=$(pids_inside)
  [[ -n $pids ]] || return 0
  for pid in $pids; do
    echo "root.sh: warning: killing process $pid ($(cat "/proc/$pid/comm" 2>/dev/null)) left running in $FRESH_ROOT" >&2
    kill -TERM "$pid" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 10))
  while [[ -n $(pids_inside) ]] && ((SECONDS < deadline)); do sleep 0.2; done
  for pid in $(pids_inside); do kill -KILL "$pid" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  while [[ -n $(pids_inside) ]] && ((SECONDS < deadline)); do sleep 0.2; done
}

unmount_all() {
  local m tries
  for m in $(mounts_below_root); do
    for _ in 1 2 3 4 5; do
      umount "$m" 2>/dev/null && break
      sleep 1
    done
    if mountpoint -q "$m"; then
      echo "root.sh: warning: $m is busy; detaching it lazily" >&2
      umount -l "$m" || die "cannot unmount $m"
    fi
  done
}

# Bind mounts are made read-only so that nothing inside the root (nor an `rm -rf` of the root while a
# command runs) can change the host's /dev or /sys; /dev/pts and /dev/shm are the root's own instances.
# /sys comes with its submounts, as on an installed system: slurmd refuses to start without the cgroup
# file systems under /sys/fs/cgroup (even when no cgroup plugin is configured). Slave propagation keeps
# unmounting them here from reaching the host's.
mount_all() {
  local r=$FRESH_ROOT m
  mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
  mount --rbind /sys "$r/sys" && mount --make-rslave "$r/sys"
  for m in $(mounts_below_root | grep "^$r/sys"); do mount -o remount,bind,ro,nosuid,nodev,noexec "$m"; done
  mount --bind /dev "$r/dev" && mount -o remount,bind,ro,nosuid "$r/dev"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$r/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/dev/shm"
}

release() {
  kill_inside
  unmount_all
}

cmd_run() {
  need_root
  local cwd=/
  if [[ ${1:-} == --cwd ]]; then cwd=$2; shift 2; fi
  (($#)) || die "usage: root.sh run [--cwd DIR] CMD [ARG...]"
  [[ -x $FRESH_ROOT/bin/bash ]] || die "no root in $FRESH_ROOT; run 'tests/fresh/root.sh build' first"
  [[ -z $(mounts_below_root) ]] || die "$FRESH_ROOT is in use by another command (mounts below it); 'root.sh cleanup' ends that"
  trap release EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mount_all
  local rc=0 pid
  # In the background with `wait`, so that a signal to this script runs the traps (which end the command
  # through kill_inside) at once instead of after the command; stdin passed on explicitly (a background
  # command's default is /dev/null).
  # shellcheck disable=SC2086  # FRESH_ENV is a list of words
  env -i HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${FRESH_ENV:-} \
    chroot "$FRESH_ROOT" /bin/sh -c 'cd "$0" && exec "$@"' "$cwd" "$@" <&0 &
  pid=$!
  wait "$pid" || rc=$?
  return "$rc"
}

cmd_cleanup() {
  need_root
  release
  [[ -z $(mounts_below_root) ]] || die "mounts remain below $FRESH_ROOT; not deleting it"
  rm -rf --one-file-system "$FRESH_ROOT"
}

case ${1:-} in
  build) cmd_build ;;
  run) shift; cmd_run "$@" ;;
  path) echo "$FRESH_ROOT" ;;
  cleanup) cmd_cleanup ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
