#!/usr/bin/env bash
# --data.stage_dir on one host (tests/cluster/run_tests.sh covers several nodes): 2 ranks stage the training
# and test sets once (one node, one copy), train from the copies and match a run without staging bit for
# bit; a staging directory too small for the dataset (a 1 MiB tmpfs, when root may mount one) and one that
# cannot be created end every rank with exit 3 and a message naming the directory and what to do.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
CN=("${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.batch 16 --train.max_steps 4
    --data.test "$FMNIST_TEST")

out=$(timeout 120 "${CN[@]}" --run-dir "$T/staged" --data.stage_dir "$T/local" 2>&1) || fail "staged run failed:\n$out"
[ "$(grep -c "^staged $FMNIST_TRAIN to $T/local/train-train.h5" <<<"$out")" = 1 ] ||
  fail "expected exactly one copy of the training set (one node):\n$out"
grep -q "^staged $FMNIST_TEST to $T/local/test-test.h5" <<<"$out" || fail "the test set was not staged:\n$out"
cmp -s "$FMNIST_TRAIN" "$T/local/train-train.h5" || fail "the staged training set differs from $FMNIST_TRAIN"
grep -q "train: $T/local/train-train.h5" "$T/staged/log.txt" || fail "the ranks did not read the staged copy"
timeout 120 "${CN[@]}" --run-dir "$T/direct" >/dev/null 2>&1 || fail "the run without staging failed"
$PY tests/e2e/ckpt_compare.py "$T/staged/checkpoints/ckpt-0000000004.h5" "$T/direct/checkpoints/ckpt-0000000004.h5" ||
  fail "training from the staged copy differs from training from the original"
echo "ok: one verified copy per node, same weights as without staging"

touch "$T/file"
expect_exit 3 "--data.stage_dir: cannot create '$T/file/x': Not a directory (on host" -- "${CN[@]}" --run-dir "$T/r1" --data.stage_dir "$T/file/x"

if [ "$(id -u)" = 0 ] && mkdir -p "$T/small" && mount -t tmpfs -o size=1m tmpfs "$T/small" 2>/dev/null; then
  rc=0
  out=$(timeout 60 "${CN[@]}" --run-dir "$T/r2" --data.stage_dir "$T/small/stage" 2>&1) || rc=$?
  umount "$T/small"
  [ "$rc" = 3 ] || fail "a full staging directory: exit $rc, want 3:\n$out"
  grep -q "not enough space in '$T/small/stage' to stage '$FMNIST_TRAIN'.*free (on host .*); give --data.stage_dir" <<<"$out" ||
    fail "no message naming the full staging directory:\n$out"
  echo "ok: a full staging directory (1 MiB tmpfs) is exit 3 naming it"
else
  echo "skipped: the full staging directory needs root to mount a small tmpfs"
fi
