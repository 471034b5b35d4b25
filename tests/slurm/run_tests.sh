#!/usr/bin/env bash
# Slurm integration tests: start a throw-away one-node cluster (tests/slurm/cluster.sh), submit jobs/cpu.sbatch
# with 2 tasks exactly as a user would, and check the preemption cycle signal -> checkpoint -> exit 75 ->
# requeue -> resume -> completed. The cluster is always stopped at the end; its directory (config, daemon
# logs, job outputs, run directories) is deleted after a pass and kept after a failure.
# Run from anywhere as root: `make test-slurm`, or `bash tests/slurm/run_tests.sh` after building the trainer.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
STANDIN=$BUILD/tests/slurm/fake_trainer

# The trainer command under test (binary and extra options; the batch script adds --config, --run-dir and
# --resume auto): the real trainer on Fashion-MNIST, a few hundred small steps. The stand-in (same signal
# contract) plays a failing trainer and the time-limit test, which needs thousands of steps.
TRAINER=${CNNTRAIN_SLURM_TEST_TRAINER:-$BUILD/cnntrain --train.batch 32 --train.max_steps 600 --log.every_steps 1}
export FAKE_STEP_MS=${FAKE_STEP_MS:-100}   # the stand-in's step time
# Compares the final checkpoint of a preempted-and-resumed run with an uninterrupted run's: every parameter
# and optimizer-state dataset bit for bit (not the whole file: it also stores paths and the config).
COMPARE=${CNNTRAIN_SLURM_TEST_COMPARE:-/usr/bin/python3 tests/e2e/ckpt_compare.py}
SIGNAL_AFTER_STEP=${CNNTRAIN_SLURM_TEST_SIGNAL_AFTER_STEP:-3}  # preempt once metrics.jsonl shows this training step
WAIT=${CNNTRAIN_SLURM_TEST_WAIT:-90}                           # seconds any one state change may take

read -r TRAINER_BIN TRAINER_ARGS <<<"$TRAINER"
[[ -x $TRAINER_BIN ]] || { echo "run_tests.sh: $TRAINER_BIN not built (make test-slurm builds it)" >&2; exit 1; }
[[ -x $STANDIN ]] || { echo "run_tests.sh: $STANDIN not built (make test-slurm builds it)" >&2; exit 1; }

export CNNTRAIN_SLURM_DIR=${CNNTRAIN_SLURM_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cnntrain-slurm.XXXXXX")}
T=$CNNTRAIN_SLURM_DIR/tests
mkdir -p "$T"
# Open MPI refuses root unless told; sbatch passes the submitting environment on to the job.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CNNTRAIN_RUNS=$T/runs

passed=0
finish() {
  local rc=$?
  bash tests/slurm/cluster.sh stop || true
  if ((rc == 0)); then
    rm -rf "$CNNTRAIN_SLURM_DIR"
  else
    echo "run_tests.sh: FAILED after $passed passed test(s); cluster directory kept: $CNNTRAIN_SLURM_DIR" >&2
  fi
  exit "$rc"
}
trap finish EXIT
t_start=$SECONDS
bash tests/slurm/cluster.sh start >/dev/null
eval "$(bash tests/slurm/cluster.sh env)"
echo "run_tests.sh: cluster up in $((SECONDS - t_start)) s ($CNNTRAIN_SLURM_DIR)"

JOB="" NAME=""
field() { scontrol show job -o "$JOB" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"; }
metrics() { echo "$CNNTRAIN_RUNS/$JOB/metrics.jsonl"; }
newest_checkpoint() {
  find "$CNNTRAIN_RUNS/$JOB/checkpoints" -maxdepth 1 -type f ! -name '*.tmp' -printf '%T@ %p\n' 2>/dev/null |
    sort -n | tail -n 1 | cut -d' ' -f2-
}
REFERENCE=""   # final checkpoint of the uninterrupted run

# The report ends with what says most (the job's output: the batch script's notes and the ranks' stderr), so
# that a log cut in the middle still shows it.
fail() {
  {
    echo "FAIL [$NAME] job ${JOB:-none}: $*"
    [[ -z $JOB ]] || { echo "---- scontrol show job -o $JOB"; scontrol show job -o "$JOB" || true; }
    for f in slurmctld slurmd; do
      echo "---- last lines of $CNNTRAIN_SLURM_DIR/log/$f.log"; tail -n 30 "$CNNTRAIN_SLURM_DIR/log/$f.log" || true
    done
    if [[ -n $JOB ]]; then
      echo "---- $CNNTRAIN_RUNS/$JOB/log.txt (last lines)"; tail -n 20 "$CNNTRAIN_RUNS/$JOB/log.txt" 2>/dev/null || echo "(none)"
      echo "---- $(metrics) (last lines)"; tail -n 8 "$(metrics)" 2>/dev/null || echo "(none)"
      echo "---- job output $T/$JOB.out, without the per-step lines"
      grep -v '^epoch [0-9]* step ' "$T/$JOB.out" 2>/dev/null | tail -n 60 || echo "(none)"
      echo "---- end of the report for: FAIL [$NAME] job $JOB: $*"
    fi
  } >&2
  exit 1
}

# submit [SCRIPT SBATCH-OPTIONS...]: jobs/cpu.sbatch with 2 tasks by default; output in $T/JOBID.out
submit() {
  local script=${1:-jobs/cpu.sbatch}
  if (($#)); then shift; else set -- --ntasks=2; fi
  JOB=$(sbatch --parsable --output="$T/%j.out" "$@" "$script") || fail "sbatch $* $script failed"
  JOB=${JOB%%;*}
}

# wait_until DESCRIPTION COMMAND...: poll every 0.2 s, at most $WAIT seconds.
wait_until() {
  local what=$1 deadline=$((SECONDS + WAIT)); shift
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${WAIT}s waiting until $what (state $(field JobState), reason $(field Reason))"
    sleep 0.2
  done
}
state_is() { [[ $(field JobState) =~ ^($1)$ ]]; }
finished() { state_is 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED'; }
requeued() { [[ $(field Restarts) -ge 1 ]] && state_is PENDING; }
trained_past() {
  awk -v n="$1" '/"event":"train"/ && match($0, /"step":[0-9]+/) && substr($0, RSTART + 7, RLENGTH - 7) + 0 >= n {
    found = 1 } END { exit !found }' "$(metrics)" 2>/dev/null
}
no_stepd() { ! compgen -G "$CNNTRAIN_SLURM_DIR/spool/*/*_$JOB.*" >/dev/null && ! compgen -G "$CNNTRAIN_SLURM_DIR/spool/*/stepd.slurm.pmix.$JOB.*" >/dev/null; }
last_end_status() { tail -n 1 "$(metrics)" 2>/dev/null | sed -n 's/.*"event":"end".*"status":"\([a-z]*\)".*/\1/p'; }

# Slurm holds a requeued job ~2 minutes (BeginTime); tests release it early, but not too early: the old step's
# slurmstepd can outlive the requeue by seconds (a new step with the same id then fails to bind its PMIx
# socket), and slurmd refuses to launch a job whose credential is not newer, at 1 s resolution, than the
# revocation that ended the previous run ("Job credential revoked").
release_requeued() {
  wait_until "the previous run's slurmstepd exited" no_stepd
  sleep 2
  scontrol update JobId="$JOB" StartTime=now || fail "scontrol update StartTime=now failed"
}

expect_completed() {   # expected restarts
  wait_until "the job finished" finished
  [[ $(field JobState) == COMPLETED && $(field ExitCode) == 0:0 ]] ||
    fail "expected COMPLETED with exit code 0:0, got $(field JobState) $(field ExitCode)"
  [[ $(field Restarts) == "$1" ]] || fail "expected $1 restart(s), got $(field Restarts)"
  [[ $(last_end_status) == completed ]] || fail "the last line of $(metrics) is not an end event with status completed"
}

# Preempt the running job with COMMAND (JOBID appended), then check checkpoint -> 75 -> requeue -> resume.
preempt_cycle() {
  submit
  wait_until "the trainer logged step $SIGNAL_AFTER_STEP" trained_past "$SIGNAL_AFTER_STEP"
  state_is RUNNING || fail "the job left RUNNING before the signal; give the trainer more steps"
  "$@" "$JOB" || fail "'$* $JOB' failed"
  wait_until "the job was requeued (exit 75 -> scontrol requeue)" requeued
  [[ $(last_end_status) == preempted ]] || fail "after the signal, $(metrics) does not end with status preempted"
  local ckpt
  ckpt=$(grep '"event":"checkpoint"' "$(metrics)" | tail -n 1 | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  [[ -n $ckpt ]] || fail "no checkpoint event in $(metrics) after the signal"
  grep -q "requeued, the next run resumes" "$T/$JOB.out" || fail "the batch script did not report the requeue"
  release_requeued
  expect_completed 1
  # The second run must continue after the checkpoint, not start over.
  local first
  first=$(awk '/"event":"start"/ {n++} n == 2 && /"event":"train"/ {print; exit}' "$(metrics)" |
          sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  [[ -n $first && $first -gt $ckpt ]] ||
    fail "the requeued run did not resume: checkpoint at step $ckpt, first step after restart '${first:-none}'"
  [[ $(grep -c '"status":"preempted"' "$(metrics)") == 1 ]] || fail "expected exactly one preempted end event"
  local final
  final=$(newest_checkpoint)
  [[ -n $REFERENCE && -n $final ]] || fail "no final checkpoint to compare (reference '$REFERENCE', this run '$final')"
  $COMPARE "$REFERENCE" "$final" ||
    fail "final weights differ from the uninterrupted run's: $COMPARE $REFERENCE $final"
  echo "  checkpoint at step $ckpt, resumed at step $first, final checkpoint equals the uninterrupted run's"
}

run_test() {
  NAME=$1; shift
  local t0=$SECONDS
  JOB=""
  export CNNTRAIN_BIN=$TRAINER_BIN CNNTRAIN_ARGS=$TRAINER_ARGS
  "$@"
  passed=$((passed + 1))
  echo "ok $passed - $NAME (job $JOB, $((SECONDS - t0)) s)"
}

test_completes() {
  submit
  expect_completed 0
  grep -q '"event":"train"' "$(metrics)" || fail "no train events in $(metrics)"
  REFERENCE=$(newest_checkpoint)
  [[ -n $REFERENCE ]] || fail "the completed run left no checkpoint in $CNNTRAIN_RUNS/$JOB/checkpoints"
}

test_failure_passes_through() {
  export CNNTRAIN_BIN=$STANDIN CNNTRAIN_ARGS="--train.max_steps 40" FAKE_EXIT_CODE=3
  submit
  unset FAKE_EXIT_CODE
  wait_until "the job finished" finished
  [[ $(field JobState) == FAILED && $(field ExitCode) == 3:0 && $(field Restarts) == 0 ]] ||
    fail "expected FAILED, exit code 3:0, no restart; got $(field JobState) $(field ExitCode) restarts $(field Restarts)"
}

# A step that dies on a signal before the trainer's start event (a start-up crash, as Open MPI's in MPI_Init)
# is relaunched and the job completes; one that dies after the start event fails the job, not relaunched.
test_startup_crash_relaunched() {
  export CNNTRAIN_BIN=$STANDIN CNNTRAIN_ARGS="--train.max_steps 20" FAKE_CRASH=before:$T/crashed-once
  submit
  unset FAKE_CRASH
  expect_completed 0
  grep -q "before the trainer started .*relaunching it (1 of 2)" "$T/$JOB.out" ||
    fail "no relaunch note in $T/$JOB.out"
  [[ -e $T/crashed-once && $(grep -c '"event":"start"' "$(metrics)") == 1 ]] ||
    fail "expected one crash before the start event and one start event"
}
test_crash_after_start_fails() {
  export CNNTRAIN_BIN=$STANDIN CNNTRAIN_ARGS="--train.max_steps 20" FAKE_CRASH=after
  submit
  unset FAKE_CRASH
  wait_until "the job finished" finished
  [[ $(field JobState) == FAILED && $(field Restarts) == 0 ]] ||
    fail "expected FAILED without a restart; got $(field JobState) $(field ExitCode) restarts $(field Restarts)"
  ! grep -q "relaunching" "$T/$JOB.out" || fail "a trainer that had started was relaunched: $T/$JOB.out"
}

# A rank that dies on its way out after the checkpoint and the end record were written (a crash in MPI's
# teardown, the OOM killer): srun reports 137, but nothing is lost, so the job must still be requeued and resume.
test_killed_leaving_still_requeued() {
  export CNNTRAIN_BIN=$STANDIN CNNTRAIN_ARGS="--train.max_steps 40" FAKE_DIE_LEAVING=1
  submit
  unset FAKE_DIE_LEAVING
  wait_until "the stand-in logged step $SIGNAL_AFTER_STEP" trained_past "$SIGNAL_AFTER_STEP"
  scancel --signal=TERM "$JOB" || fail "scancel --signal=TERM $JOB failed"
  wait_until "the job was requeued (137 after a preempted end record -> 75 -> scontrol requeue)" requeued
  grep -q "srun returned 137, but .* ends with status preempted" "$T/$JOB.out" ||
    fail "srun did not return 137, or the script did not say why it requeued: $T/$JOB.out"
  release_requeued
  expect_completed 1
}

test_cancel_is_final() {
  submit
  wait_until "the trainer logged step $SIGNAL_AFTER_STEP" trained_past "$SIGNAL_AFTER_STEP"
  scancel "$JOB" || fail "scancel $JOB failed"
  wait_until "the job finished" finished
  wait_until "the batch script decided not to requeue" grep -q "so not requeueing" "$T/$JOB.out"
  sleep 1
  [[ $(field JobState) == CANCELLED && $(field Restarts) == 0 ]] ||
    fail "expected CANCELLED without restart, got $(field JobState) restarts $(field Restarts)"
}

# The GPU scripts on this CPU-only node: 2 tasks instead of 8, GPUs that exist only as a Slurm count, and the
# real trainer on the CUDA kernels under the SIMT emulator (--device emu overrides the script's --device cuda)
# for a few steps of a small model, so the scripts' launch line, the device binding and the NCCL code path
# (against the emulated NCCL) all run as they would on GPUs.
gpu_script_runs() {   # SCRIPT SBATCH-OPTIONS...
  local cfg=$T/emu_small.ini
  printf '%s\n' "model = fmnist_cnn" "[data]" "train = data/fashion_mnist/train.h5" "[train]" "batch = 8" \
    "max_steps = 6" "[log]" "every_steps = 1" > "$cfg"
  export CNNTRAIN_BIN=$TRAINER_BIN CNNTRAIN_CONFIG=$cfg CNNTRAIN_ARGS="--device emu --bn.sync true"
  submit "$@" --ntasks-per-node=2 --cpus-per-task=1
  unset CNNTRAIN_CONFIG
  expect_completed 0
  grep -q '"visible_gpus":"0,1,2,3,4,5,6,7"' "$(metrics)" ||
    fail "rank 0 should see all 8 GPUs of the node (CUDA_VISIBLE_DEVICES=0,...,7) to pick its own"
  local log=$CNNTRAIN_RUNS/$JOB/log.txt
  grep -q "gradient sync: emulated NCCL" "$log" || fail "the job did not average gradients through the NCCL path"
  grep -q "device binding (2 ranks)" "$log" || fail "no binding table in $log"
  [[ $(grep -c '"event":"train"' "$(metrics)") == 6 ]] || fail "expected 6 train events in $(metrics)"
}
test_gpu_node() { gpu_script_runs jobs/gpu_node.sbatch; }
test_multinode_ib() {
  # No InfiniBand here: the script falls back from UCX to the ob1 PML (TCP and shared memory) with one log line.
  gpu_script_runs jobs/multinode_ib.sbatch --nodes=1
  grep -q "no InfiniBand HCA on" "$T/$JOB.out" || fail "multinode_ib.sbatch did not log its fallback to TCP"
}

# The real thing behind --signal=B:USR1@120: a job with a 3-minute limit gets SIGUSR1 about a minute in (Slurm
# checks every 30-60 s), is requeued and resumes. Slow (~75 s), so only with CNNTRAIN_SLURM_TEST_TIME_LIMIT=1.
test_time_limit() {
  export CNNTRAIN_BIN=$STANDIN CNNTRAIN_ARGS="--train.max_steps 100000"
  submit jobs/cpu.sbatch --ntasks=2 --time=3
  WAIT=150 wait_until "the time-limit warning requeued the job" requeued
  grep -q "batch shell got SIGUSR1" "$T/$JOB.out" || fail "the batch shell did not report SIGUSR1"
  [[ $(last_end_status) == preempted ]] || fail "$(metrics) does not end with status preempted"
  release_requeued
  wait_until "the requeued job resumed" grep -q '"event":"start".*"step":[1-9]' "$(metrics)"
  scancel "$JOB"
  wait_until "the job finished" finished
}

test_blocks_identical() {
  local f ref
  ref=$(sed -n '/^# ---- cnntrain launch/,$p' jobs/cpu.sbatch)
  [[ -n $ref ]] || fail "jobs/cpu.sbatch has no '# ---- cnntrain launch' block"
  for f in jobs/*.sbatch; do
    bash -n "$f" || fail "$f: syntax error"
    [[ $(sed -n '/^# ---- cnntrain launch/,$p' "$f") == "$ref" ]] ||
      fail "$f: the launch block differs from jobs/cpu.sbatch's; keep them identical"
  done
}

run_test "jobs/*.sbatch share one launch block" test_blocks_identical
run_test "cpu.sbatch with 2 tasks completes" test_completes
# What --signal=B:USR1@120 does before the time limit: only the batch shell gets the signal.
run_test "SIGUSR1 to the batch shell -> checkpoint, requeue, resume" preempt_cycle scancel --signal=USR1 --batch
# What preemption does: the job steps get SIGTERM directly.
run_test "SIGTERM to the training step -> checkpoint, requeue, resume" preempt_cycle scancel --signal=TERM
run_test "SIGTERM to the batch shell -> checkpoint, requeue, resume" preempt_cycle scancel --signal=TERM --batch
run_test "a rank killed on its way out after the checkpoint (srun 137) -> requeue, resume" test_killed_leaving_still_requeued
run_test "scancel JOBID (SIGTERM, job cancelled) ends the job without a requeue" test_cancel_is_final
run_test "a failing trainer's exit code passes through, no requeue" test_failure_passes_through
run_test "a crash before the trainer starts -> the step is relaunched, the job completes" test_startup_crash_relaunched
run_test "a crash after the trainer started -> the job fails, no relaunch" test_crash_after_start_fails
run_test "gpu_node.sbatch trains (2 of 8 tasks, count-only GPUs, --device emu through NCCL)" test_gpu_node
run_test "multinode_ib.sbatch trains (1 node, 2 tasks, count-only GPUs, --device emu through NCCL)" test_multinode_ib
if [[ ${CNNTRAIN_SLURM_TEST_TIME_LIMIT:-0} == 1 ]]; then
  run_test "time limit -> SIGUSR1 (--signal=B:USR1@120) -> checkpoint, requeue, resume" test_time_limit
fi
echo "run_tests.sh: all $passed Slurm tests passed in $((SECONDS - t_start)) s"
