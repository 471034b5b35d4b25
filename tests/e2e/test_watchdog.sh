#!/usr/bin/env bash
# The collective watchdog with --comm.timeout_s 5: a stalled rank (injected into the emulated NCCL with
# CNNTRAIN_NCCL_EMU_FAULT, --device emu at np 3) and a SIGSTOPped rank (--device cpu, MPI, np 3) make every other
# process exit non-zero within twice the timeout, log.txt names the stalled rank, and no process of the job is
# left; an injected asynchronous NCCL error aborts the job with the error named. The emu runs are strict: the
# emulated NCCL reports any use of an aborted communicator ("nccl-emu: invalid use"), and CNNTRAIN_SIMT_STRICT_DEVICE
# refuses CUDA calls from a thread that did not select the rank's device (the watchdog's probe thread).
source "$(dirname "$0")/lib.bash"
TIMEOUT=5
ARGS=(--config jobs/fashion_mnist.ini --data.test "" --train.max_steps 100000 --train.batch 6 --log.every_steps 1
      --checkpoint.at_end false --comm.timeout_s $TIMEOUT)

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

export CNNTRAIN_SIMT_STRICT_DEVICE=1

# strict_clean OUT WHAT: neither strict mode reported anything in the job's output.
strict_clean() {
  ! grep -q "nccl-emu: invalid use\|cudaErrorDeviceUninitialized" "$1" ||
    fail "$2: a strict-mode report:\n$(grep "nccl-emu: invalid use\|cudaErrorDeviceUninitialized" "$1")"
}

# wait_for FILE PATTERN SECONDS: polls until FILE matches PATTERN.
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -q -- "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "no '$2' in $1 after $3 s:\n$(cat "$1" 2>/dev/null)"
    sleep 0.1
  done
}

# pid_of RUN_DIR RANK: from the rank's heartbeat file (each rank writes its pid there).
pid_of() { sed -n 's/^pid //p' "$1/heartbeat/rank-$(printf %05d "$2")" 2>/dev/null; }
running() { [ -e /proc/$1 ] && [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != Z ]; }

# check_ended RUN_DIR RC START WHAT STALLED_RANK: mpirun failed; every other rank's process was gone within
# 2x the timeout of the fault; the stalled one, which ignores SIGTERM (the trainer turns it into a checkpoint
# request) while it hangs, is gone too once the launcher's SIGKILL follows (polled for up to 20 s more).
check_ended() {
  local run=$1 rc=$2 t0=$3 what=$4 stalled=$5 deadline r pid
  [ "$rc" != 0 ] || fail "$what: the job exited 0"
  deadline=$(awk -v t="$t0" -v lim=$((2 * TIMEOUT)) 'BEGIN { printf "%.3f", t + lim }')
  for r in 0 1 2; do
    [ "$r" = "$stalled" ] && continue
    pid=$(pid_of "$run" $r)
    [ -n "$pid" ] || fail "$what: no heartbeat file for rank $r"
    while running "$pid"; do
      awk -v n="$(now)" -v d="$deadline" 'BEGIN { exit !(n > d) }' &&
        fail "$what: rank $r (pid $pid) still runs $((2 * TIMEOUT)) s after the fault"
      sleep 0.1
    done
  done
  local took
  took=$(elapsed "$t0" "$(now)")
  pid=$(pid_of "$run" "$stalled")
  for _ in $(seq 200); do running "$pid" || break; sleep 0.1; done
  running "$pid" && fail "$what: the stalled rank's process $pid is still running 20 s after the others ended"
  echo "ok: $what: exit $rc, the other ranks ended within $took s of the fault, no process left"
}

# An emu job at np 3 whose rank 1 stalls at its 5th collective call (a gradient bucket), extra environment "$@"
# (VAR=value): waits for the stall and checks that every rank then ended. Sets run and out.
stall_rank1() {
  local what=$1 rc=0 t0 job v xs=(-x CNNTRAIN_NCCL_EMU_FAULT -x CNNTRAIN_SIMT_STRICT_DEVICE)
  run="$E2E_TMP/$2"
  out="$run.out"
  shift 2
  for v in "$@"; do xs+=(-x "${v%%=*}"); done
  env "$@" CNNTRAIN_NCCL_EMU_FAULT=stall:1:5 timeout 120 "${MPIRUN[@]}" 3 "${xs[@]}" \
    "$BUILD/cnntrain" "${ARGS[@]}" --device emu --run-dir "$run" > "$out" 2>&1 &
  job=$!
  wait_for "$out" "rank 1 stalls at its collective call #5" 60
  t0=$(now)
  wait $job || rc=$?
  check_ended "$run" $rc "$t0" "$what" 1
}

# 1. With deferred emulator streams, as on a GPU, the host's calls return at once and the device reaches a
# collective only after it.
stall_rank1 "emu stall of rank 1" stall CNNTRAIN_SIMT_DEFER=17
grep -q "collective timeout: waited .* in NCCL collective #6 .*rank 1 did not arrive" "$run/log.txt" ||
  fail "log.txt does not name rank 1 as missing:\n$(cat "$run/log.txt")"
grep -q "rank 1 (host .*): did not arrive" "$run/log.txt" || fail "log.txt lacks rank 1's details"
for r in 0 2; do
  grep -q "error \[rank $r/3 on" "$run/log.txt" || fail "rank $r did not report the timeout in log.txt"
done
strict_clean "$out" "emu stall of rank 1"

# 1b. The same with immediate streams: every rank is inside its NCCL call (the stalled one in the stall, the
# others waiting for it) when its watchdog aborts the communicator, and the call returns ncclInProgress. The
# main thread must then leave without touching the aborted communicator.
stall_rank1 "emu stall of rank 1, immediate streams" stall-immediate
grep -q "collective timeout: waited .* in NCCL collective #6" "$run/log.txt" ||
  fail "no collective timeout in log.txt:\n$(cat "$run/log.txt")"
strict_clean "$out" "emu stall of rank 1, immediate streams"

# 2. --device cpu (MPI), np 3: SIGSTOP rank 1 once training runs.
run="$E2E_TMP/sigstop"
out="$run.out"
timeout 120 "${MPIRUN[@]}" 3 "$BUILD/cnntrain" "${ARGS[@]}" --device cpu --log.every_steps 20 --run-dir "$run" \
  > "$out" 2>&1 &
job=$!
wait_for "$run/metrics.jsonl" '"event":"train"' 60
victim=$(pid_of "$run" 1)
[ -n "$victim" ] || fail "no pid in $run/heartbeat/rank-00001"
kill -STOP "$victim"
t0=$(now)
rc=0
wait $job || rc=$?
check_ended "$run" $rc "$t0" "SIGSTOP of rank 1 (pid $victim)" 1
grep -q "collective timeout: waited .* in MPI collective .*heartbeat stopped on rank 1" "$run/log.txt" ||
  fail "log.txt does not name the stopped rank 1:\n$(cat "$run/log.txt")"
grep -q "rank 1 (host .*pid $victim).*heartbeat did not move" "$run/log.txt" || fail "log.txt lacks rank 1's details"

# 3. An asynchronous NCCL error on rank 1 at its 4th collective call.
run="$E2E_TMP/asyncerr"
rc=0
CNNTRAIN_NCCL_EMU_FAULT=error:1:4 timeout 120 "${MPIRUN[@]}" 2 -x CNNTRAIN_NCCL_EMU_FAULT -x CNNTRAIN_SIMT_STRICT_DEVICE \
  "$BUILD/cnntrain" "${ARGS[@]}" --device emu --run-dir "$run" > "$run.out" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "the injected async error did not fail the job"
grep -q "rank 1/2 on .*collective error: NCCL reported an asynchronous error on this rank: ncclRemoteError" \
  "$run/log.txt" || fail "log.txt does not name the async error:\n$(cat "$run/log.txt")"
grep -q "injected by CNNTRAIN_NCCL_EMU_FAULT=error:1:4" "$run/log.txt" || fail "log.txt lacks NCCL's last error"
strict_clean "$run.out" "injected async error"
echo "ok: injected async error: exit $rc, $(grep -o 'ncclRemoteError ([^)]*)' "$run/log.txt" | head -1)"
