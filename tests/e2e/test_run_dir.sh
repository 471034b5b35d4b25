#!/usr/bin/env bash
# A run directory is one run (issue 26): Ctrl-C (SIGINT) between periodic checkpoints writes a checkpoint and
# exits 130, and --resume auto ends byte-identical to an uninterrupted run; a second SIGINT exits at once;
# --train.stop_at_step stops with a checkpoint without touching the schedule and its resume ends byte-identical;
# a new run or another model into an existing run directory exits 2 or 4 and leaves every file as it was;
# keep-last-K never removes the checkpoint just written; a resume with nothing left still evaluates. One
# process, Fashion-MNIST, batch 32, 2000 steps: the cosine schedule decays after 375 warmup steps, so a changed
# schedule would change the weights.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
STEPS=2000
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps $STEPS
        --log.every_steps 1000 --checkpoint.every_steps 700)
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }
same_as_ref() {  # same_as_ref DIR WHAT
  $PY tests/e2e/ckpt_compare.py "$(ck "$T/ref" $STEPS)" "$(ck "$1" $STEPS)" > /dev/null ||
    fail "$2: final weights differ from the uninterrupted run"
}
"$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/ref" > "$T/ref.log" 2>&1 || { cat "$T/ref.log"; fail "reference run"; }

# Ctrl-C: checkpoint at the step it arrived in, exit 130, the resume command in the message.
"${SIGINT_DEFAULT[@]}" "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/int" > "$T/int.1.log" 2>&1 &
pid=$!
wait_for_training "$T/int.1.log"
sleep 0.3
kill -INT $pid
rc=0; wait $pid || rc=$?
[ $rc = 130 ] || { cat "$T/int.1.log"; fail "SIGINT: exit $rc, want 130"; }
step=$(json_field "$T/int/metrics.jsonl" end steps)
[ "$(json_field "$T/int/metrics.jsonl" end reason)" = SIGINT ] || fail "SIGINT: end event reason"
[ "$step" -lt $STEPS ] && [ $((step % 700)) != 0 ] || fail "SIGINT: stopped at step $step; want one between checkpoints"
[ -e "$(ck "$T/int" "$step")" ] || fail "SIGINT: no checkpoint at step $step"
resume=$(grep -o "continue with: .*" "$T/int.1.log" | sed 's/continue with: //')
[ "$resume" = "$BUILD/cnntrain --config $T/int/config.ini --run-dir $T/int --resume auto" ] ||
  fail "SIGINT: resume command '$resume'"
$resume > "$T/int.2.log" 2>&1 || { cat "$T/int.2.log"; fail "SIGINT: the printed resume command failed"; }
grep -q "resumed from $(ck "$T/int" "$step")" "$T/int.2.log" || fail "SIGINT: did not resume from step $step"
[ "$(grep -c '"event":"resumed"' "$T/int/metrics.jsonl")" = 1 ] || fail "SIGINT: no resumed event in metrics.jsonl"
same_as_ref "$T/int" SIGINT
echo "ok: SIGINT at step $step: checkpoint, exit 130, resumed with the printed command, byte-identical"

# A second SIGINT while the first one's checkpoint is being written (slowed down by the test hook) exits at once.
CNNTRAIN_TEST_CKPT_SLEEP_MS=20000 "${SIGINT_DEFAULT[@]}" "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/int2" \
  > "$T/int2.log" 2>&1 &
pid=$!
wait_for_training "$T/int2.log"
kill -INT $pid
for _ in $(seq 100); do grep -q "received SIGINT" "$T/int2.log" && break; sleep 0.1; done
t0=$SECONDS
kill -INT $pid
rc=0; wait $pid || rc=$?
[ $rc = 130 ] && [ $((SECONDS - t0)) -le 3 ] || fail "second SIGINT: exit $rc after $((SECONDS - t0)) s"
grep -q "second SIGINT: exiting now without a checkpoint" "$T/int2.log" || fail "second SIGINT: no message"
[ -z "$(ls "$T/int2/checkpoints" | grep -v '\.tmp$')" ] || fail "second SIGINT: a checkpoint was committed"
echo "ok: a second SIGINT exits at once with 130"

# stop_at_step: exit 0 with a checkpoint; the schedule is the full run's, so the resume ends byte-identical.
"$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/stop" --train.stop_at_step 1000 > "$T/stop.1.log" 2>&1 ||
  { cat "$T/stop.1.log"; fail "stop_at_step run"; }
[ "$(json_field "$T/stop/metrics.jsonl" end status)" = stopped ] || fail "stop_at_step: end status"
[ "$(ls "$T/stop/checkpoints")" = "$(printf 'ckpt-%010d.h5\nckpt-%010d.h5' 700 1000)" ] ||
  fail "stop_at_step: checkpoints $(ls "$T/stop/checkpoints")"
"$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/stop" --resume auto > "$T/stop.2.log" 2>&1 ||
  { cat "$T/stop.2.log"; fail "stop_at_step: resume"; }
same_as_ref "$T/stop" stop_at_step
echo "ok: --train.stop_at_step 1000 + resume: byte-identical"
# Resumed with nothing left to train, the run still evaluates the test set it is given.
"$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/stop" --resume auto --data.test "$FMNIST_TEST" --eval.batch 1000 \
  > "$T/stop.3.log" 2>&1 || { cat "$T/stop.3.log"; fail "resume with nothing left"; }
grep -q "nothing left to train" "$T/stop.3.log" && grep -q "test accuracy" "$T/stop.3.log" &&
  [ "$(json_field "$T/stop/metrics.jsonl" eval count)" = 10000 ] || fail "nothing left: no evaluation"
echo "ok: a resume with nothing left to train evaluates the test set"

# Refusals leave the directory exactly as it was (names, sizes, modification times).
before=$(dir_snapshot "$T/ref")
expect_exit 2 "run directory '$T/ref' already holds a run" -- "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/ref"
expect_exit 2 "continue it with --resume auto, or give this run a new --run-dir" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --model lenet5 --run-dir "$T/ref"
expect_exit 4 "holds a run of model fmnist_cnn" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --model lenet5 --run-dir "$T/ref" --resume auto
expect_exit 4 "this run builds model lenet5" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --model lenet5 --run-dir "$T/ref" --resume auto
[ "$(dir_snapshot "$T/ref")" = "$before" ] || fail "a refused run changed $T/ref"
# A directory without run.json (written before it existed): the checkpoints' model decides.
cp -r "$T/ref" "$T/old" && rm "$T/old/run.json"
before=$(dir_snapshot "$T/old")
expect_exit 4 "holds a run of model fmnist_cnn, global batch 32, but this run builds model lenet5" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --model lenet5 --run-dir "$T/old" --resume auto
[ "$(dir_snapshot "$T/old")" = "$before" ] || fail "a refused run changed $T/old"
# Another optimizer's checkpoints are no damaged files to skip on the way to starting from scratch.
expect_exit 4 "hold sgd state, but this run uses --train.optimizer adamw" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --train.optimizer adamw --run-dir "$T/old" --resume auto
[ "$(dir_snapshot "$T/old")" = "$before" ] || fail "a refused run changed $T/old"
# config.ini does not pin the run directory: --config RUN_DIR/config.ini repeats the run in a new one.
"$BUILD/cnntrain" --config "$T/ref/config.ini" --train.max_steps 2 --run-dir "$T/again" > "$T/again.log" 2>&1 ||
  { cat "$T/again.log"; fail "--config RUN_DIR/config.ini into a new directory"; }
echo "ok: refusals exit 2/4 and change nothing; config.ini repeats the run elsewhere"
# docs/run_directory.md lists every entry a run directory has.
for e in $(ls "$T/int"); do
  grep -qE "^\| \`$e/?\` \|" docs/run_directory.md || fail "docs/run_directory.md does not list '$e'"
done

# keep-last-K: a resume that skipped a damaged newer checkpoint keeps what it writes, and leaves the newer one.
run_keep() { "$BUILD/cnntrain" "${COMMON[@]}" --checkpoint.keep 1 --run-dir "$T/keep" "$@" >> "$T/keep.log" 2>&1 ||
  { cat "$T/keep.log"; fail "keep run $*"; }; }
run_keep --train.stop_at_step 260
head -c 5000 "$(ck "$T/keep" 260)" > "$(ck "$T/keep" 900)"
run_keep --train.stop_at_step 500 --resume auto
grep -q "skipping checkpoint: cannot open checkpoint '$(ck "$T/keep" 900)'" "$T/keep.log" ||
  fail "keep: the damaged 900 was not skipped"
[ "$(ls "$T/keep/checkpoints")" = "$(printf 'ckpt-%010d.h5\nckpt-%010d.h5' 500 900)" ] ||
  fail "keep=1 left $(ls "$T/keep/checkpoints" | tr '\n' ' ') (want the new 500 and the damaged 900)"
echo "ok: keep-last-K keeps the checkpoint just written"
