# Shared helpers for the end-to-end scripts (sourced). BUILD is the build directory.
set -euo pipefail
BUILD=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
MPIRUN=(mpirun --oversubscribe -np)
PY=/usr/bin/python3  # Debian's python (h5py, numpy), whatever else is first on PATH
FMNIST_TRAIN=data/fashion_mnist/train.h5
FMNIST_TEST=data/fashion_mnist/test.h5
FMNIST_IDX=${FMNIST_IDX:-/usr/share/datasets/fashion-mnist}
E2E_TMP=$(mktemp -d /tmp/cnntrain-e2e-XXXXXX)
# The scratch directory goes at exit without changing the script's status: a job's last files (a rank's
# heartbeat or log written while mpirun tears the job down) can race with the removal, so it is retried once,
# and a directory that still cannot be removed is a warning naming what is left, not a silent failure.
e2e_cleanup() {
  local rc=$?
  rm -rf "$E2E_TMP" 2>/dev/null || { sleep 2; rm -rf "$E2E_TMP" 2>/dev/null; } ||
    echo "warning: could not remove $E2E_TMP: $(find "$E2E_TMP" 2>/dev/null | head -5 | tr '\n' ' ')" >&2
  exit "$rc"
}
[ -n "${KEEP_TMP:-}" ] || trap e2e_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# cmd | matches PATTERN: grep -q that reads all of its input. `cmd | grep -q` fails at random under pipefail:
# grep -q exits at its first match, cmd's next write dies of SIGPIPE (141) and that becomes the pipeline's status.
matches() { local rc=1; grep -q "$@" && rc=0; cat >/dev/null; return "$rc"; }

# expect_exit CODE NEEDLE -- command...: runs the command (60 s cap, so a hang fails), checks the exit code
# and that stderr+stdout mention NEEDLE.
expect_exit() {
  local want=$1 needle=$2; shift 3
  local out rc=0
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc (want $want) from: $*\n$out"
  grep -qF -- "$needle" <<<"$out" || fail "output of '$*' does not mention '$needle':\n$out"
  echo "ok: exit $rc, '$needle' <- ${*: -4}"
}

# json_field FILE EVENT FIELD: FIELD of the last EVENT line of a metrics.jsonl.
json_field() {
  $PY -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev=[e for e in ev if e["event"]==sys.argv[2]]
print(ev[-1][sys.argv[3]] if ev else "")' "$@"
}

# "${SIGINT_DEFAULT[@]}" COMMAND... &: runs COMMAND with SIGINT at its default disposition, as its own process
# ($! is COMMAND's pid: the wrapper execs it). A background job of a non-interactive shell starts with SIGINT
# ignored, and a program keeps an inherited "ignored" (as cnntrain does); a terminal's Ctrl-C reaches a
# process whose SIGINT is not ignored, which this recreates.
SIGINT_DEFAULT=($PY -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')

# wait_for_training LOG: until the trainer has printed its step plan (training is under way), at most 10 s.
wait_for_training() {
  for _ in $(seq 100); do grep -q "^training" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no training started: $(tail -5 "$1")"
}

# dir_snapshot DIR: every entry's path, size and modification time (ns), sorted: equal snapshots mean nothing
# was created, removed or written.
dir_snapshot() { (cd "$1" && find . -printf '%p %s %T@\n' | sort); }
