#!/usr/bin/env bash
# Kill test: SIGKILL one rank of a running job, restart with --resume auto until the run completes; it must
# resume from the newest committed checkpoint and end with weights byte-identical to an uninterrupted run.
# Every trial's kill must land while the job runs (all its ranks alive, the kill delivered, the first run
# not completed), and some must land while a checkpoint is being written: every trial waits for a random
# training step, then half kill at once and half wait for the next checkpoint's .tmp file (a fault-injection
# delay holds the file open); a write counts as cut when the restart finds its .tmp.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
RANDOM=20261122  # reproducible targets
STEPS=48
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps $STEPS
        --log.every_steps 1 --checkpoint.every_steps 4 --checkpoint.keep 2)
export CNNTRAIN_TEST_CKPT_SLEEP_MS=40
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }
newest() { ls "$1/checkpoints" 2>/dev/null | grep -E '^ckpt-[0-9]+\.h5$' | sort | tail -1 || true; }
# The last step the job has logged (train events come every step).
logged_step() { grep -o '"event":"train","epoch":[0-9]*,"step":[0-9]*' "$1/metrics.jsonl" 2>/dev/null | tail -1 |
                grep -o '[0-9]*$' || echo 0; }
tmp_files() { ls "$1/checkpoints" 2>/dev/null | grep -c '\.tmp$' || true; }

# wait_for DESCRIPTION COMMAND...: polls every 5 ms until COMMAND succeeds (60 s deadline).
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + 60))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "gave up waiting for $what"
    sleep 0.005
  done
}

trials=0 during_write=0
for np in 2 4; do
  ref="$T/ref$np"
  "${MPIRUN[@]}" $np "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$ref" > "$ref.log" 2>&1 || fail "reference np=$np"
  n_trials=$([ $np = 2 ] && echo 6 || echo 5)
  for t in $(seq 1 $n_trials); do
    dir="$T/k$np-$t"
    write_trial=$([ $((t % 2)) = 0 ] && echo 1 || echo 0)
    # Write trials hold each checkpoint open 300 ms longer, so the kill lands before it is committed.
    # Under a time limit: Open MPI 4.1's mpirun has been seen to deadlock (main thread on a futex, ranks exited)
    # after one of its ranks was SIGKILLed on a loaded machine; the restart below is what this test is about.
    CNNTRAIN_TEST_CKPT_SLEEP_MS=$([ $write_trial = 1 ] && echo 300 || echo 40) \
      timeout -k 5 90 "${MPIRUN[@]}" $np "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" > "$dir.1.log" 2>&1 &
    guard=$!
    target=$((2 + RANDOM % (STEPS - 10)))
    wait_for "step $target of trial $t (np $np)" eval '[ "$(logged_step "$dir")" -ge $target ]'
    mpi=$(pgrep -P $guard mpirun || true)
    ranks=($([ -n "$mpi" ] && pgrep -P "$mpi" cnntrain || true))
    [ ${#ranks[@]} = $np ] || fail "trial $t np $np: ${#ranks[@]} of $np ranks alive at the kill: the job was not running"
    victim=${ranks[$((RANDOM % np))]}
    if [ $write_trial = 1 ]; then
      wait_for "a checkpoint write after step $target in trial $t (np $np)" eval '[ "$(tmp_files "$dir")" -gt 0 ]'
    else
      sleep "0.0$((RANDOM % 5))"
    fi
    at_step=$(logged_step "$dir")
    kill -9 "$victim" || fail "trial $t np $np: the kill was not delivered (rank already gone)"
    rc=0
    wait $guard 2>/dev/null || rc=$?
    [ $rc != 0 ] || fail "trial $t np $np: the job exited 0 although a rank was killed"
    ! grep -q "completed $STEPS steps" "$dir.1.log" || fail "trial $t np $np: the run completed before the kill"
    want=$(newest "$dir")
    timeout 120 "${MPIRUN[@]}" $np "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" --resume auto \
      > "$dir.2.log" 2>&1 || { cat "$dir.2.log"; fail "restart of trial $t (np $np) failed"; }
    if [ -n "$want" ]; then
      grep -q "resumed from $dir/checkpoints/$want" "$dir.2.log" ||
        fail "trial $t np $np: expected to resume from $want:\n$(grep -E 'resum|skipping' "$dir.2.log")"
    else
      grep -q "no checkpoint" "$dir.2.log" || fail "trial $t np $np: no checkpoint, yet no fresh start"
    fi
    [ -z "$(ls "$dir/checkpoints" | grep '\.tmp$')" ] || fail "trial $t np $np: a .tmp file survived the restart"
    # The restart found the killed job's unfinished checkpoint: the kill cut a write.
    writing=$(grep -c "removed 1 unfinished checkpoint" "$dir.2.log" || true)
    during_write=$((during_write + writing))
    $PY tests/e2e/ckpt_compare.py "$(ck "$ref" $STEPS)" "$(ck "$dir" $STEPS)" > /dev/null ||
      fail "trial $t np $np: final weights differ from the uninterrupted run"
    echo "ok: trial $t np $np killed at step $at_step$([ "$writing" -gt 0 ] && echo ' during a checkpoint write')," \
         "resumed from ${want:-scratch}"
    trials=$((trials + 1))
  done
done
[ $during_write -ge 1 ] || fail "no kill landed during a checkpoint write"
echo "ok: $trials kill trials, all while the job ran, $during_write during a checkpoint write; all byte-identical"
