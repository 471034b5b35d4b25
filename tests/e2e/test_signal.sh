#!/usr/bin/env bash
# Preemption: SIGUSR1 (forwarded by mpirun to every rank) or SIGTERM to a single rank makes all ranks stop at
# the same step, write a checkpoint and exit 75; --resume auto then finishes with weights byte-identical to an
# uninterrupted run; SIGINT to one rank does the same with exit 130. Ctrl-C at a terminal (SIGINT to mpirun's
# process group) reaches only mpirun, which sends SIGTERM to the ranks a second later: they save as for SIGTERM,
# and mpirun exits 1 (docs/troubleshooting.md).
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
STEPS=1000
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps $STEPS
        --log.every_steps 1000)
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/ref" > "$T/ref.log" 2>&1 || fail "reference run"

preempt() {  # preempt NAME HOW [EXIT]
  local dir="$T/$1" how=$2 want=${3:-75} rc=0
  # In its own session with SIGINT at its default, as a job started from a terminal.
  setsid "${SIGINT_DEFAULT[@]}" "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" > "$dir.1.log" 2>&1 &
  local mpi=$!
  # Signal once training is under way (the first progress is logged after start-up).
  for _ in $(seq 100); do grep -q "^training" "$dir.1.log" 2>/dev/null && break; sleep 0.1; done
  sleep 0.3
  case $how in
    usr1-mpirun) kill -USR1 $mpi ;;
    term-rank) kill -TERM "$(pgrep -P $mpi cnntrain | tail -1)" ;;
    int-rank) kill -INT "$(pgrep -P $mpi cnntrain | tail -1)" ;;  # e.g. srun forwarding Ctrl-C to its tasks
    ctrl-c) kill -INT -- -$mpi ;;  # the terminal signals the foreground process group
  esac
  wait $mpi || rc=$?
  [ $rc = "$want" ] || { cat "$dir.1.log"; fail "$1: exit $rc, want $want"; }
  [ "$(json_field "$dir/metrics.jsonl" end status)" = preempted ] || fail "$1: end event is not preempted"
  local step
  step=$(json_field "$dir/metrics.jsonl" end steps)
  [ "$step" -lt $STEPS ] || fail "$1: the signal arrived after training ended (step $step); make the run longer"
  [ -e "$(ck "$dir" "$step")" ] || fail "$1: no checkpoint at the stop step $step"
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" --resume auto > "$dir.2.log" 2>&1 ||
    fail "$1: resume failed"
  grep -q "resumed from $(ck "$dir" "$step")" "$dir.2.log" || fail "$1: did not resume from step $step"
  $PY tests/e2e/ckpt_compare.py "$(ck "$T/ref" $STEPS)" "$(ck "$dir" $STEPS)" > /dev/null ||
    fail "$1: final weights differ from the uninterrupted run"
  echo "ok: $1 stopped at step $step with exit $want, resumed, byte-identical"
}
preempt usr1 usr1-mpirun
preempt term term-rank
preempt int int-rank 130
preempt ctrl-c ctrl-c 1
grep -q "received SIGTERM" "$T/ctrl-c.1.log" || fail "ctrl-c: the ranks did not stop on mpirun's SIGTERM"
