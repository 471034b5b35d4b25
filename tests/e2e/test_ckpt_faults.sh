#!/usr/bin/env bash
# Checkpoint I/O failing on one rank, at np 2 and 4: rank R fails its K-th dataset write, its K-th attribute
# write, or its stat/open of the checkpoint to resume from (the test hooks of docs/checkpoints.md), and a real
# full disk: the checkpoint directory on a small tmpfs that fills up during the second checkpoint. Each case:
# every rank exits 4 (each rank's own exit code is recorded) within seconds, naming the failing rank and the
# cause, no process is left, the previous committed checkpoint is intact and no .tmp remains, and
# --resume auto then continues to weights byte-identical to an uninterrupted run. Needs root (mount).
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
MOUNTS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || true; done
  [ -n "${KEEP_TMP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || fail "the full-disk case mounts a tmpfs: run as root (as make test does in CI)"

STEPS=12
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps $STEPS
        --log.every_steps 1000 --checkpoint.every_steps 4 --checkpoint.keep 5)
# fmnist_cnn with SGD: 10 parameters, 4 batch-norm buffers and 10 momentum slices per checkpoint, each with a
# crc32 attribute, plus 13 file attributes. The second checkpoint (step 8) is the one made to fail.
DATASETS=24
ATTRS=$((DATASETS + 13))
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }

# mpirun would kill the other ranks as soon as one exits non-zero: let every rank finish, so that each
# rank's own exit code can be checked (mpirun's own status then says nothing).
export OMPI_MCA_orte_abort_on_non_zero_status=0
# run NP DIR [args...]: cnntrain under mpirun with a 120 s cap; each rank's exit code lands in DIR.rc/rankN,
# the elapsed seconds in DIR.secs. Returns 124 on the time limit, else the largest rank exit code (137 for a
# rank that left no code: killed).
run() {
  local np=$1 dir=$2; shift 2
  rm -rf "$dir.rc" && mkdir -p "$dir.rc"
  local t0=$SECONDS rc=0
  RC_DIR="$dir.rc" timeout 120 "${MPIRUN[@]}" "$np" -x RC_DIR -x CNNTRAIN_TEST_CKPT_FAULT \
    bash -c '"$0" "$@"; rc=$?; echo $rc > "$RC_DIR/rank$OMPI_COMM_WORLD_RANK"; exit $rc' \
    "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" "$@" >> "$dir.log" 2>&1 || rc=$?
  echo $((SECONDS - t0)) > "$dir.secs"
  [ "$rc" = 124 ] && return 124
  rc=0
  for r in $(seq 0 $((np - 1))); do
    local mine; mine=$(cat "$dir.rc/rank$r" 2>/dev/null || echo 137)
    [ "$mine" -gt "$rc" ] && rc=$mine
  done
  return $rc
}

# expect_failure NP DIR NEEDLE [args...]: the run fails cleanly on every rank with exit 4.
expect_failure() {
  local np=$1 dir=$2 needle=$3; shift 3
  local rc=0
  run "$np" "$dir" "$@" || rc=$?
  [ "$rc" = 4 ] || fail "$dir: exit $rc (want 4):\n$(tail -20 "$dir.log")"
  [ "$(cat "$dir.secs")" -le 30 ] || fail "$dir: the failing run took $(cat "$dir.secs") s"
  for r in $(seq 0 $((np - 1))); do
    [ "$(cat "$dir.rc/rank$r" 2>/dev/null)" = 4 ] || fail "$dir: rank $r exited '$(cat "$dir.rc/rank$r" 2>/dev/null)'" \
      "(want 4; killed or aborted?):\n$(tail -20 "$dir.log")"
  done
  grep -qF -- "$needle" "$dir.log" || fail "$dir: output does not name '$needle':\n$(tail -20 "$dir.log")"
  ! grep -q "MPI_ABORT" "$dir.log" || fail "$dir: the job was aborted instead of every rank leaving cleanly"
  ! pgrep -f -- "--run-dir $dir( |$)" > /dev/null || fail "$dir: cnntrain processes are left after the run"
  echo "ok: $dir: every rank exited 4 in $(cat "$dir.secs") s: $(grep -o "cnntrain: error.*" "$dir.log" | head -1 | cut -c1-160)"
}

# resumes_identically NP DIR STEP: the committed checkpoint STEP is the reference's, no .tmp is left, and
# --resume auto continues from it to the reference's final weights, bit for bit.
resumes_identically() {
  local np=$1 dir=$2 step=$3 ref=$T/ref$1
  $PY tests/e2e/ckpt_compare.py "$(ck "$ref" "$step")" "$(ck "$dir" "$step")" --buffers > /dev/null ||
    fail "$dir: checkpoint $step is not intact"
  [ -z "$(ls "$dir/checkpoints" | grep '\.tmp$')" ] || fail "$dir: a .tmp file was left: $(ls "$dir/checkpoints")"
  [ "$(ls "$dir/checkpoints" | grep -c '\.h5$')" = 1 ] || fail "$dir: expected only checkpoint $step: $(ls "$dir/checkpoints")"
  CNNTRAIN_TEST_CKPT_FAULT= run "$np" "$dir" --resume auto || fail "$dir: resume failed:\n$(tail -20 "$dir.log")"
  grep -q "resumed from $(ck "$dir" "$step")" "$dir.log" || fail "$dir: did not resume from step $step"
  $PY tests/e2e/ckpt_compare.py "$(ck "$ref" $STEPS)" "$(ck "$dir" $STEPS)" --buffers > /dev/null ||
    fail "$dir: the resumed run's weights differ from the uninterrupted run's"
  echo "ok: $dir: resumed from step $step, final weights byte-identical"
}

export CNNTRAIN_TEST_CKPT_FAULT=
for np in 2 4; do
  last=$((np - 1))
  run $np "$T/ref$np" || fail "reference run np $np:\n$(tail -20 "$T/ref$np.log")"

  # Rank `last` fails the 10th dataset write of the second checkpoint; rank 0 a file attribute of it.
  CNNTRAIN_TEST_CKPT_FAULT=write:$last:$((DATASETS + 10)) expect_failure $np "$T/write$np" "rank $last on"
  resumes_identically $np "$T/write$np" 4
  CNNTRAIN_TEST_CKPT_FAULT=attr:0:$((ATTRS + DATASETS + 5)) expect_failure $np "$T/attr$np" "rank 0 on"
  resumes_identically $np "$T/attr$np" 4

  # Resuming from a checkpoint one rank cannot see, or fails to open.
  for kind in stat open; do
    dir=$T/$kind$np
    mkdir -p "$dir/checkpoints" && chmod -R 700 "$dir" && cp "$(ck "$T/ref$np" 4)" "$dir/checkpoints/"
    CNNTRAIN_TEST_CKPT_FAULT=$kind:$last expect_failure $np "$dir" "rank $last on" --resume "$(ck "$dir" 4)"
    resumes_identically $np "$dir" 4
  done

  # A real full disk: room for the first checkpoint (1.7 MB) but not for the second.
  dir=$T/full$np
  mkdir -p "$dir/checkpoints"
  mount -t tmpfs -o size=2600k,mode=0700 tmpfs "$dir/checkpoints" ||
    fail "cannot mount a tmpfs on $dir/checkpoints (root in a container may need CAP_SYS_ADMIN)"
  MOUNTS+=("$dir/checkpoints")
  expect_failure $np "$dir" "MB free on the file system of '$dir/checkpoints'"
  grep -q "could not be written: rank [0-9]* on" "$dir.log" || fail "$dir: the message names no rank"
  mount -o remount,size=64m "$dir/checkpoints"
  resumes_identically $np "$dir" 4
done
echo "ok: checkpoint write, attribute, stat, open and disk-full failures at np 2 and 4: clean exit 4 everywhere"
