#!/usr/bin/env bash
# `make test-fresh`: what a new user does on a fresh Debian 12, checked for real. In a minimal root
# (tests/fresh/root.sh: debootstrap --variant=minbase bookworm, cached) it installs only make and git, clones
# the committed HEAD of this checkout, and runs the README's two commands: `make test`, then `make run`.
# Prints the time of each; on failure the tail of the step's log and its path. The root is deleted after a
# pass and kept after a failure (look around with `tests/fresh/root.sh run bash`; `tests/fresh/root.sh
# cleanup` removes it).
# Environment: FRESH_DIR (build/fresh) and the other FRESH_* variables of root.sh; FRESH_MAKE_ARGS, extra
# arguments for both make commands (e.g. -j2; default none, as the README says).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export FRESH_DIR=${FRESH_DIR:-build/fresh}
ROOTSH=tests/fresh/root.sh
LOGS=$FRESH_DIR/logs
read -r -a MAKE_ARGS <<<"${FRESH_MAKE_ARGS:-}"
mkdir -p "$LOGS"
LOGS=$(cd "$LOGS" && pwd)
rm -f "$LOGS"/*.log

sha=$(git rev-parse --short HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  echo "test-fresh: note: the checkout has uncommitted changes; the fresh root gets the committed HEAD $sha only"

t_all=$SECONDS
child=""
finish() {
  local rc=$?
  # Interrupted during a step: end it (root.sh then unmounts) before deciding about the root.
  if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if ((rc == 0)); then
    bash "$ROOTSH" cleanup
  else
    echo "test-fresh: FAILED; the root is kept in $(bash "$ROOTSH" path) ('bash $ROOTSH cleanup' removes it)" >&2
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step NAME LOG CMD...: runs CMD with its output in $LOGS/LOG; prints the time, or the log's tail on failure.
step() {
  local name=$1 log=$LOGS/$2 t0=$SECONDS rc=0
  shift 2
  echo "test-fresh: $name ..."
  "$@" >"$log" 2>&1 <&0 &
  child=$!
  wait "$child" || rc=$?
  child=""
  if ((rc != 0)); then
    echo "---- last 40 lines of $log" >&2
    tail -n 40 "$log" >&2
    echo "test-fresh: FAILED: $name (exit $rc after $((SECONDS - t0)) s); full log: $log" >&2
    exit 1
  fi
  echo "test-fresh: $name: ok in $((SECONDS - t0)) s (log: $log)"
}

INSIDE=(bash "$ROOTSH" run)   # a command, not a function: `step` must be able to signal it

step "minimal Debian 12 root" root.log bash "$ROOTSH" build
root=$(bash "$ROOTSH" path)
git bundle create "$root/root/cnntrain.bundle" HEAD 2>/dev/null
step "apt-get install make git" apt.log "${INSIDE[@]}" sh -c \
  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make git'
step "git clone ($sha)" clone.log "${INSIDE[@]}" --cwd /root \
  git -c advice.detachedHead=false clone /root/cnntrain.bundle cnntrain
step "make ${MAKE_ARGS[*]:+${MAKE_ARGS[*]} }test" make-test.log "${INSIDE[@]}" --cwd /root/cnntrain make "${MAKE_ARGS[@]}" test
grep -E '^make test: [0-9]+ passed, 0 failed' "$LOGS/make-test.log" ||
  { echo "test-fresh: make test exited 0 without its summary line; read $LOGS/make-test.log" >&2; exit 1; }
step "make ${MAKE_ARGS[*]:+${MAKE_ARGS[*]} }run" make-run.log "${INSIDE[@]}" --cwd /root/cnntrain make "${MAKE_ARGS[@]}" run
grep -E 'completed|test accuracy' "$LOGS/make-run.log" | tail -n 2
echo "test-fresh: passed in $((SECONDS - t_all)) s (logs in $LOGS)"
