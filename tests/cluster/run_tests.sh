#!/usr/bin/env bash
# Multi-node tests on a simulated cluster (tests/cluster/cluster.sh: 3 nodes in network namespaces, one slurmd
# each, Open MPI over TCP between them), each with the real trainer:
#   1. jobs/multinode_ib.sbatch on 2 nodes x 2 tasks: IB falls back to TCP, "4 ranks on 2 nodes", node-local
#      ranks 0-1 on each node, the same weights as 4 ranks on one host.
#   2. preemption of the 2-node job (scancel -s USR1 to the steps; SIGUSR1 to the batch shell, as the time-limit
#      warning sends it): checkpoint, exit 75, requeue, resume on both nodes.
#   3. a link cut mid-run and 4. a node killed mid-run: every process of the job ends within 2x
#      --comm.timeout_s, the report names the silent ranks and host, the newest checkpoint is intact.
#   5. the 2-node checkpoint resumed on 1 node x 2 ranks and on 3 nodes x 1 rank: the same weights.
#   6. --data.stage_dir: one copy per node on node-local storage; a full staging directory is exit 3 on
#      every rank.
# Everything is torn down at the end, also on failure or Ctrl-C, and the last check is that nothing is left.
# Run as root: `make test-cluster`, or `bash tests/cluster/run_tests.sh` after building the trainer.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
CL="bash tests/cluster/cluster.sh"
# --comm.timeout_s of tests 3 and 4 (start-up under load must fit); seconds any one state change may take.
TIMEOUT_S=${CNNTRAIN_CLUSTER_TEST_TIMEOUT_S:-15}
WAIT=${CNNTRAIN_CLUSTER_TEST_WAIT:-120}
PY=/usr/bin/python3  # Debian's, with h5py (make deps)
[[ -x $BUILD/cnntrain ]] || { echo "run_tests.sh: $BUILD/cnntrain not built (make test-cluster builds it)" >&2; exit 1; }

export CNNTRAIN_CLUSTER_DIR=${CNNTRAIN_CLUSTER_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cnntrain-cluster.XXXXXX")}
export CNNTRAIN_CLUSTER_NODES=3
# Namespace names of this run only, so that two runs on one machine do not meet (each has its own switch).
export CNNTRAIN_CLUSTER_NS=${CNNTRAIN_CLUSTER_NS:-cnnc$$}
D=$CNNTRAIN_CLUSTER_DIR
T=$D/tests
mkdir -p "$T"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# TCP between the nodes over their bridge, shared memory within a node; sbatch passes this on to the job.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=${CNNTRAIN_CLUSTER_NET:-10.77.0}.0/24
# Shared-memory segments in each node's own directory, as on real nodes: in the one /dev/shm of this machine,
# Open MPI's names (vader_segment.NODE.UID.JOBID.RANK, JOBID from Slurm's job and step numbers) are the same
# in two cluster runs at once, whose ranks then attach to each other's segments and crash.
export OMPI_MCA_btl_vader_backing_directory=$D/local
export CNNTRAIN_RUNS=$T/runs
unset OMPI_MCA_pml

passed=0 NAME="" JOB=""
finish() {
  local rc=$?
  trap - EXIT INT TERM
  $CL stop || true
  local left
  if ! left=$($CL leftovers); then
    echo "run_tests.sh: FAIL: the teardown left behind:"$'\n'"$left" >&2
    rc=1
  fi
  if ((rc == 0)); then rm -rf "$D"; echo "run_tests.sh: torn down, nothing left behind"
  else echo "run_tests.sh: FAILED after $passed passed test(s); files kept in $D" >&2; fi
  exit "$rc"
}
trap finish EXIT
trap 'echo "run_tests.sh: interrupted" >&2; exit 130' INT TERM

fail() {
  {
    echo "FAIL [$NAME] job ${JOB:-none}: $*"
    [[ -n $JOB ]] && { echo "---- job output"; cat "$T/$JOB.out" 2>/dev/null || true; }
    for f in "$D"/log/slurmctld.log "$D"/log/slurmd.n1.log "$D"/log/slurmd.n2.log; do
      echo "---- last lines of $f"; tail -n 15 "$f" 2>/dev/null || true
    done
  } >&2
  exit 1
}

t_start=$SECONDS
$CL start
echo "run_tests.sh: cluster up in $((SECONDS - t_start)) s ($D)"

field() { $CL run scontrol show job -o "$JOB" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"; }
wait_until() {
  local what=$1 deadline=$((SECONDS + WAIT)); shift
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${WAIT}s waiting until $what (state $(field JobState))"
    sleep 0.3
  done
}
state_is() { [[ $(field JobState) =~ ^($1)$ ]]; }
finished() { state_is 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL'; }
metrics() { echo "$CNNTRAIN_RUNS/$JOB/metrics.jsonl"; }
# trained_past N, failing at once if the job ends before.
running_past() { trained_past "$1" || { ! finished || fail "the job ended before step $1"; false; }; }
trained_past() {
  awk -v n="$1" '/"event":"train"/ && match($0, /"step":[0-9]+/) && substr($0, RSTART + 7, RLENGTH - 7) + 0 >= n {
    f = 1 } END { exit !f }' "$(metrics)" 2>/dev/null
}
newest_checkpoint() {   # RUN_DIR
  find "$1/checkpoints" -maxdepth 1 -name '*.h5' -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -n 1 | cut -d' ' -f2-
}
# The trainer processes of the job: cnntrain in any node namespace.
job_procs() {
  local k
  for k in 1 2 3; do ip netns pids "$CNNTRAIN_CLUSTER_NS-n$k" 2>/dev/null; done |
    while read -r p; do [[ $(cat "/proc/$p/comm" 2>/dev/null) == cnntrain ]] && echo "$p"; done
}
# The previous run's slurmstepds are gone (their PMIx sockets would clash with the requeued run's).
no_stepd() { ! compgen -G "$D/spool/*/*_$JOB.*" >/dev/null && ! compgen -G "$D/spool/*/stepd.slurm.pmix.$JOB.*" >/dev/null; }
all_nodes_idle() { [[ $($CL run sinfo -h -N -o %T | grep -c '^idle$') == 3 ]]; }

# A small configuration of the real trainer: fmnist_cnn, global batch 12 (4, 2 or 3 ranks divide it).
CFG=$T/small.ini
printf '%s\n' "model = fmnist_cnn" "[data]" "train = data/fashion_mnist/train.h5" "prefetch = 2" "[train]" \
  "batch = 12" "lr = 0.01" "[log]" "every_steps = 1" >"$CFG"
export CNNTRAIN_CONFIG=$CFG

# submit SCRIPT SBATCH-OPTIONS... (trainer options in CNNTRAIN_ARGS)
submit() {
  local script=$1; shift
  JOB=$($CL run sbatch --parsable --output="$T/%j.out" "$@" "$script") || fail "sbatch $* $script failed"
  JOB=${JOB%%;*}
}
expect_completed() {
  wait_until "the job finished" finished
  [[ $(field JobState) == COMPLETED ]] || fail "expected COMPLETED, got $(field JobState) $(field ExitCode)"
}

run_test() {   # NUMBER NAME FUNCTION...; CNNTRAIN_CLUSTER_TEST_ONLY="1 3" runs some of them
  local num=$1; shift
  [[ -z ${CNNTRAIN_CLUSTER_TEST_ONLY:-} || " $CNNTRAIN_CLUSTER_TEST_ONLY " == *" $num "* ]] || return 0
  NAME=$1; shift
  local t0=$SECONDS
  JOB=""
  "$@"
  passed=$((passed + 1))
  echo "ok $num - $NAME (${JOB:+job $JOB, }$((SECONDS - t0)) s)"
}

# --- 1 ---------------------------------------------------------------------------------------------------
REF_2NODE=""
test_multinode() {
  CNNTRAIN_ARGS="--device emu --bn.sync true --train.max_steps 6 --checkpoint.every_steps 3 --checkpoint.keep 10" \
    submit jobs/multinode_ib.sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1
  expect_completed
  local out=$T/$JOB.out log=$CNNTRAIN_RUNS/$JOB/log.txt
  grep -q "no InfiniBand HCA on n1" "$out" || fail "no IB->TCP fallback line in $out"
  grep -q "topology: 4 ranks on 2 nodes (n1: ranks 0-1, n2: ranks 2-3)" "$log" ||
    fail "no '4 ranks on 2 nodes' topology line in $log: $(grep topology "$log")"
  grep "topology:" "$log" | sed 's/^/  /'
  # Node-local ranks: 0-1 on each node, from the binding table (rank host local-rank ...).
  local locals
  locals=$(awk '/device binding/ {t = 1; next} t && $1 ~ /^[0-9]+$/ {printf "%s:%s:%s ", $1, $2, $3} t && !NF {t = 0}' "$log")
  [[ $locals == "0:n1:0 1:n1:1 2:n2:0 3:n2:1 " ]] || fail "node-local ranks: expected 0:n1:0 1:n1:1 2:n2:0 3:n2:1, got '$locals'"
  echo "  node-local ranks (rank:host:local): $locals"
  REF_2NODE=$CNNTRAIN_RUNS/$JOB
  # The same run as 4 ranks on one host (shared memory only): the same global batches, the same weights.
  mpirun --oversubscribe --mca btl self,vader -np 4 "$BUILD/cnntrain" --config "$CFG" --device emu --bn.sync true --threads 1 \
    --train.max_steps 6 --checkpoint.every_steps 3 --checkpoint.keep 10 --run-dir "$T/onehost" >"$T/onehost.out" 2>&1 ||
    fail "the 4-rank single-host run failed: $(tail -n 5 "$T/onehost.out")"
  $PY tests/e2e/ckpt_compare.py "$T/onehost/checkpoints/ckpt-0000000006.h5" \
    "$REF_2NODE/checkpoints/ckpt-0000000006.h5" || fail "2 nodes x 2 ranks and 1 host x 4 ranks differ"
  echo "  final weights equal those of 4 ranks on one host"
}

# --- 2 ---------------------------------------------------------------------------------------------------
preempt_cycle() {   # SCANCEL-OPTIONS...
  CNNTRAIN_ARGS="--device cpu --train.max_steps 300" \
    submit jobs/multinode_ib.sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1
  wait_until "the trainer logged step 3" running_past 3
  $CL run scancel "$@" "$JOB" || fail "scancel $* failed"
  wait_until "the job was requeued" bash -c "[[ \$($CL run scontrol show job -o $JOB | grep -o 'Restarts=[0-9]*') == Restarts=1 ]]"
  grep -q '"status":"preempted"' "$(metrics)" || fail "no preempted end event"
  # Release the requeued job once its old steps are gone (as tests/slurm/run_tests.sh explains).
  wait_until "the old steps ended" no_stepd
  sleep 2
  $CL run scontrol update JobId="$JOB" StartTime=now
  expect_completed
  [[ $(grep -c "topology: 4 ranks on 2 nodes" "$CNNTRAIN_RUNS/$JOB/log.txt") -ge 2 ]] ||
    fail "the resumed run did not run on 2 nodes again"
  grep -q "requeued, the next run resumes" "$T/$JOB.out" || fail "the batch script did not report the requeue"
  local resumed
  resumed=$(awk '/"event":"start"/ {n++} n == 2 && /"event":"train"/ {print; exit}' "$(metrics)" |
            sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  [[ ${resumed:-0} -gt 1 ]] || fail "the requeued run started over instead of resuming (first step '$resumed')"
  echo "  scancel $*: checkpoint, exit 75, requeued, resumed at step $resumed on both nodes"
}
# scancel -s USR1 signals the job's steps (preemption by hand); --batch signals the batch shell only, which is
# what the time-limit warning (--signal=B:USR1@120) does.
test_preempt() { preempt_cycle --signal=USR1; preempt_cycle --signal=USR1 --batch; }

# --- 3 and 4 ---------------------------------------------------------------------------------------------
# fault_test ACTION: a long 2-node job; after step 10 ACTION hits node n2; every trainer process must be gone
# within 2x the collective timeout, with a report naming ranks 2-3 and host n2, and the newest checkpoint must
# still open.
fault_test() {
  CNNTRAIN_ARGS="--device cpu --train.max_steps 100000 --checkpoint.every_steps 5 --comm.timeout_s $TIMEOUT_S" \
    submit jobs/multinode_ib.sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1
  wait_until "the trainer logged step 10" running_past 10
  local t0 ckpt
  t0=$(date +%s.%N)
  "$@"
  while [[ -n $(job_procs) ]]; do
    (($(date +%s) - ${t0%.*} <= 2 * TIMEOUT_S + 2)) || fail "trainer processes still alive $(( $(date +%s) - ${t0%.*} )) s after the fault: $(job_procs | tr '\n' ' ')"
    sleep 0.2
  done
  local took
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  awk -v t="$took" -v l="$((2 * TIMEOUT_S))" 'BEGIN {exit !(t <= l)}' ||
    fail "the job's processes took $took s to end, more than 2x --comm.timeout_s ($((2 * TIMEOUT_S)) s)"
  local report
  report=$(grep -h "cnntrain: error.*\(collective timeout\|MPI call failed\)" "$T/$JOB.out" "$CNNTRAIN_RUNS/$JOB/log.txt" 2>/dev/null | head -n 1 || true)
  [[ $report == *"ranks 2,3"*"n2"* || $report == *"ranks 0,1"*"n1"* ]] ||
    fail "no report naming the silent ranks and host; first report: '${report:-none}'"
  ckpt=$(newest_checkpoint "$CNNTRAIN_RUNS/$JOB")
  [[ -n $ckpt ]] && $PY tests/e2e/ckpt_compare.py "$ckpt" "$ckpt" ||
    fail "the newest committed checkpoint '$ckpt' does not open"
  echo "  all trainer processes ended $took s after the fault (limit $((2 * TIMEOUT_S)) s); newest checkpoint $(basename "$ckpt") intact"
  echo "  report: ${report:0:300}"
}
restore_n2() {
  $CL run scancel "$JOB" 2>/dev/null || true
  $CL reboot n2
  wait_until "all nodes idle again" all_nodes_idle
}
test_link_cut() { fault_test $CL cut n2; restore_n2; }
test_node_killed() { fault_test $CL kill n2; restore_n2; }

# --- 5 ---------------------------------------------------------------------------------------------------
# The 2-node run's step-3 checkpoint resumed elsewhere must end at step 6 with the 2-node run's weights (within
# the rounding of sums over another rank count).
resume_on() {   # SBATCH-OPTIONS...
  local dir=$T/resume-$#-$RANDOM
  mkdir -p "$dir/checkpoints"
  cp "$REF_2NODE/checkpoints/ckpt-0000000003.h5" "$dir/checkpoints/"
  CNNTRAIN_RUN_DIR=$dir CNNTRAIN_ARGS="--device emu --bn.sync true --train.max_steps 6 --checkpoint.every_steps 3" \
    submit jobs/multinode_ib.sbatch "$@" --cpus-per-task 1
  expect_completed
  grep -m 1 '"event":"train"' "$dir/metrics.jsonl" | grep -q '"step":4,' || fail "did not resume from step 3"
  $PY tests/e2e/ckpt_compare.py "$dir/checkpoints/ckpt-0000000006.h5" "$REF_2NODE/checkpoints/ckpt-0000000006.h5" \
    --rtol 1e-4 || fail "resumed with $* the weights differ from the 2-node run's"
  echo "  $(grep -o 'topology: [^(]*' "$dir/log.txt" | tail -n 1): same weights at step 6"
}
test_resume_elsewhere() {
  [[ -n $REF_2NODE ]] || fail "needs test 1's run"
  resume_on -N 1 --ntasks-per-node 2
  resume_on -N 3 --ntasks-per-node 1
}

# --- 6 ---------------------------------------------------------------------------------------------------
test_staging() {
  CNNTRAIN_ARGS="--device cpu --train.max_steps 3 --data.stage_dir $D/local/stage" \
    submit jobs/multinode_ib.sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1
  expect_completed
  local out=$T/$JOB.out n
  [[ $(grep -c "^staged data/fashion_mnist/train.h5 .* on n1:" "$out") == 1 &&
     $(grep -c "^staged data/fashion_mnist/train.h5 .* on n2:" "$out") == 1 ]] ||
    fail "expected one staging copy on each node: $(grep '^staged' "$out")"
  for n in n1 n2; do
    cmp -s data/fashion_mnist/train.h5 "$D/nodes/$n/stage/train-train.h5" || fail "no staged copy on $n"
  done
  grep -q "train: $D/local/stage/train-train.h5" "$CNNTRAIN_RUNS/$JOB/log.txt" || fail "the ranks did not read the staged copy"
  echo "  one verified copy per node (n1, n2), ranks read $D/local/stage/train-train.h5"
  # A staging directory too small for the dataset, on n2 only: a 1 MiB tmpfs in n2's mount namespace.
  local slurmd_pid
  slurmd_pid=$(<"$D/run/slurmd.n2.pid")
  nsenter -t "$slurmd_pid" -m sh -c "mkdir -p $D/local/small && mount -t tmpfs -o size=1m tmpfs $D/local/small"
  CNNTRAIN_ARGS="--device cpu --train.max_steps 3 --data.stage_dir $D/local/small" \
    submit jobs/multinode_ib.sbatch -N 2 --ntasks-per-node 2 --cpus-per-task 1
  wait_until "the job finished" finished
  nsenter -t "$slurmd_pid" -m umount "$D/local/small"
  [[ $(field JobState) == FAILED && $(field ExitCode) == 3:0 ]] || fail "expected FAILED 3:0, got $(field JobState) $(field ExitCode)"
  grep -q "not enough space in '$D/local/small' to stage 'data/fashion_mnist/train.h5'.*(on host n2)" "$T/$JOB.out" ||
    fail "no error naming the full staging directory on n2"
  grep -q "n1: tasks 0-1: Exited with exit code 3" "$T/$JOB.out" && grep -q "n2: tasks 2-3: Exited with exit code 3" "$T/$JOB.out" ||
    fail "not every rank exited with 3: $(grep 'exit code' "$T/$JOB.out")"
  echo "  full staging directory on n2: every rank exited 3, '$(grep -o "not enough space[^;]*" "$T/$JOB.out" | head -n 1)'"
}

run_test 1 "multinode_ib.sbatch on 2 nodes x 2 ranks over TCP equals 4 ranks on one host" test_multinode
run_test 2 "2-node job: scancel -s USR1, and the time-limit warning -> checkpoint, exit 75, requeue, resume on both nodes" test_preempt
run_test 3 "link cut mid-run: every process ends within 2x --comm.timeout_s, report names the host" test_link_cut
run_test 4 "node killed mid-run: every process ends within 2x --comm.timeout_s, report names the host" test_node_killed
run_test 5 "2-node checkpoint resumed on 1 node x 2 ranks and 3 nodes x 1 rank: same weights" test_resume_elsewhere
run_test 6 "--data.stage_dir: one verified copy per node; a full staging dir is exit 3 on every rank" test_staging
echo "run_tests.sh: all $passed cluster tests passed in $((SECONDS - t_start)) s"
