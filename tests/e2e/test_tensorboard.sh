#!/usr/bin/env bash
# TensorBoard: the event files, read back by the real TensorBoard reader (PyPI's tensorboard in a test-only
# virtual environment), hold exactly the values of metrics.jsonl, also across a crash and resume that repeats
# logged steps (a new file per process start; TensorBoard drops the orphaned steps); weight and gradient
# histograms; ETA fields in the train events and log lines; the live progress line only on a terminal.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
TBPY=$(bash tests/obs/tb_venv.sh "$BUILD/tbvenv") ||
  fail "the TensorBoard reader could not be installed (message above); this test needs PyPI once"
COMMON=(--config jobs/fashion_mnist.ini --train.batch 32 --log.every_steps 20 --checkpoint.every_steps 40
        --log.histograms_every 20)
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --train.max_steps 60 --run-dir "$T/run" > "$T/1.log" 2>&1 ||
  { cat "$T/1.log"; fail "first run"; }
# As if the job died after logging step 60 but before committing its checkpoint: the next process resumes
# from step 40 and logs steps 41-60 again.
rm "$T/run/checkpoints/ckpt-0000000060.h5"
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --train.max_steps 80 --resume auto --run-dir "$T/run" \
  > "$T/2.log" 2>&1 || { cat "$T/2.log"; fail "resumed run"; }
grep -q "resumed from .*ckpt-0000000040.h5" "$T/2.log" || fail "did not resume from step 40"
n=$(ls "$T/run/tensorboard" | grep -c '^events\.out\.tfevents\.[0-9]*\.')
[ "$n" = 2 ] || fail "want one event file per process start, found $n"
# fmnist_cnn: conv1 16x3x3x1 = 144 weights, fc1 128x1568 = 200704.
"$TBPY" tests/obs/tb_check.py "$T/run" --histograms weights/conv1.weight:144 grads/fc1.weight:200704 ||
  fail "TensorBoard does not show metrics.jsonl"
# ... so also top-5 beside test accuracy (eval/test_top5), which every eval event carries.
grep -q '"event":"eval".*"test_top5":' "$T/run/metrics.jsonl" || fail "no test_top5 in the eval events"
$PY - "$T/run/metrics.jsonl" <<'PYEOF' || fail "ETA fields"
import json, sys
train = [json.loads(l) for l in open(sys.argv[1]) if '"event":"train"' in l]
for e in train:
    for k in ("elapsed_s", "eta_epoch_s", "eta_s", "grad_norm", "mem_in_use", "mem_peak"):
        assert isinstance(e.get(k), (int, float)) and e[k] >= 0, (k, e)
    assert e["eta_s"] >= e["eta_epoch_s"], e
assert train[-1]["eta_s"] == 0, train[-1]
print("ok: ETA, elapsed, gradient norm and memory in all %d train events" % len(train))
PYEOF
grep -q "| elapsed [0-9:]*, ETA epoch [0-9:]*, run [0-9:]*$" "$T/2.log" || fail "log lines carry no ETA"
# mpirun gives ranks a pseudo-terminal even when its own output goes to a file: still plain lines.
! grep -q $'\r' "$T/1.log" "$T/2.log" || fail "a status line (\\r) in redirected output"
echo "ok: redirected output has plain lines only"
# On a terminal (script(1) provides one): one status line rewritten in place, above it the usual lines.
script -qec "$BUILD/cnntrain ${COMMON[*]} --train.max_steps 30 --data.test '' --run-dir $T/tty" /dev/null \
  > "$T/tty.log" 2>&1 || { cat "$T/tty.log"; fail "run on a terminal"; }
grep -q "epoch 1 \[[#.]*\] [0-9]*/1875  loss .*  ETA epoch [0-9:]*, run [0-9:]*"$'\r' "$T/tty.log" ||
  fail "no status line on a terminal"
grep -q "epoch 1 step 20/1875 (global 20) loss" "$T/tty.log" || fail "no log line on a terminal"
echo "ok: status line on a terminal"
