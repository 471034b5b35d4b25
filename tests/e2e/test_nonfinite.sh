#!/usr/bin/env bash
# Non-finite detection: the test-only hook CNNTRAIN_TEST_NAN writes a NaN into fc1.weight's gradient on rank 1
# at step 26. With --train.on_nonfinite stop every rank exits with 5, and the message names the step, the rank,
# the layer and the last committed checkpoint; with skip the update is skipped on every rank, counted and
# logged, and training completes; AdamW does not count the skipped update.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps 40 --log.every_steps 10
        --checkpoint.every_steps 10)
# Each rank writes its own exit code, so "every rank exits with 5" is checked, not only mpirun's summary.
CNNTRAIN_TEST_NAN=1:fc1.weight:25 "${MPIRUN[@]}" 2 -x CNNTRAIN_TEST_NAN bash -c \
  '"$0" "$@"; rc=$?; echo $rc > "'"$T"'/rc.$OMPI_COMM_WORLD_RANK"; exit $rc' "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/stop" \
  > "$T/stop.log" 2>&1 && fail "the run did not fail"
for r in 0 1; do
  [ "$(cat "$T/rc.$r")" = 5 ] || { cat "$T/stop.log"; fail "rank $r exited with $(cat "$T/rc.$r"), want 5"; }
done
host=$(hostname)
want="non-finite gradient at step 26, started on rank 1 in fc1.weight of layer fc1: rank 1 on $host (1 values"
grep -qF "$want" "$T/stop.log" || { cat "$T/stop.log"; fail "message does not name step, rank and layer"; }
grep -qF "the last committed checkpoint is $T/stop/checkpoints/ckpt-0000000020.h5" "$T/stop.log" ||
  fail "message does not name the last committed checkpoint"
[ "$(json_field "$T/stop/metrics.jsonl" end status)" = failed ] || fail "end event is not failed"
[ "$(json_field "$T/stop/metrics.jsonl" end reason)" = nonfinite ] || fail "end event reason"
[ ! -e "$T/stop/checkpoints/ckpt-0000000030.h5" ] || fail "a checkpoint was written after the bad step"
echo "ok: stop: every rank exited with 5; $(grep -o 'non-finite gradient at step 26[^:]*' "$T/stop.log" | head -1)"

CNNTRAIN_TEST_NAN=1:fc1.weight:25 "${MPIRUN[@]}" 2 -x CNNTRAIN_TEST_NAN "$BUILD/cnntrain" "${COMMON[@]}" \
  --train.on_nonfinite skip --run-dir "$T/skip" > "$T/skip.log" 2>&1 || { cat "$T/skip.log"; fail "skip run failed"; }
grep -q "non-finite gradient at step 26, .*update was skipped on every rank .*1 step skipped so far" "$T/skip.log" ||
  fail "the skipped step is not logged"
$PY - "$T/skip/metrics.jsonl" "$T/skip/checkpoints/ckpt-0000000040.h5" <<'PYEOF' || fail "skip run results"
import json, sys, h5py, numpy as np
ev = [json.loads(l) for l in open(sys.argv[1])]
skipped = [e for e in ev if e["event"] == "skipped"]
assert [e["step"] for e in skipped] == [26] and skipped[0]["skipped_total"] == 1, skipped
train = {e["step"]: e for e in ev if e["event"] == "train"}
assert train[30]["skipped"] == 1 and all(train[s]["skipped"] == 0 for s in (10, 20, 40)), train
assert all(np.isfinite(train[s]["loss"]) for s in train), train  # the skipped step's loss is left out
assert ev[-1]["event"] == "end" and ev[-1]["status"] == "completed", ev[-1]
with h5py.File(sys.argv[2]) as f:
    for name, d in f["params"].items():
        assert np.isfinite(d[()]).all(), name
print("ok: skip: step 26 skipped and counted, training completed with finite weights")
PYEOF

# AdamW counts only applied updates: its bias correction after a skipped step is that of 39 updates in 40 steps.
CNNTRAIN_TEST_NAN=0:fc1.weight:25 "$BUILD/cnntrain" "${COMMON[@]}" --train.optimizer adamw --train.lr 0.001 \
  --train.on_nonfinite skip --run-dir "$T/adamw" > "$T/adamw.log" 2>&1 || { cat "$T/adamw.log"; fail "adamw skip run"; }
n=$($PY -c "import h5py, sys; print(int(h5py.File(sys.argv[1]).attrs['optimizer_steps']))" \
  "$T/adamw/checkpoints/ckpt-0000000040.h5")
[ "$n" = 39 ] || fail "AdamW counted $n updates in 40 steps with one skipped (want 39)"
echo "ok: AdamW does not count the skipped step (39 updates in 40 steps)"
