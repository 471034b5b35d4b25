#!/usr/bin/env bash
# cnntrain --eval-only (docs/models.md, "Evaluation"): the final checkpoint of a run, evaluated without
# training at np 1 and np 2, gives the run's own final test_acc exactly (and its test loss within rounding of
# the sums' order), with per-class accuracy and the confusion matrix in the eval event and a PNG of it; no
# training set is needed; --init.from CHECKPOINT evaluates the same; without weights to load, or without a test set, it refuses.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
COMMON=(--config jobs/fashion_mnist.ini --train.batch 32 --log.every_steps 1000)
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --train.max_steps 30 --run-dir "$T/run" > "$T/run.log" 2>&1 ||
  { cat "$T/run.log"; fail "training"; }
C="$T/run/checkpoints/ckpt-0000000030.h5"
acc=$(json_field "$T/run/metrics.jsonl" eval test_acc)
loss=$(json_field "$T/run/metrics.jsonl" eval test_loss)
for np in 1 2; do
  # Another global batch than the run's: evaluation does not depend on it.
  "${MPIRUN[@]}" $np "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --data.train "" --eval-only --resume "$C" \
    --train.batch 64 --run-dir "$T/ev$np" > "$T/ev$np.log" 2>&1 || { cat "$T/ev$np.log"; fail "--eval-only np $np"; }
  $PY - "$T/ev$np" "$acc" "$loss" <<'PY' || fail "--eval-only np $np does not reproduce the run's evaluation"
import json, struct, sys
d = sys.argv[1]
ev = [e for e in map(json.loads, filter(str.strip, open(d + "/metrics.jsonl"))) if e["event"] == "eval"]
assert len(ev) == 1, ev
e = ev[0]
assert e["test_acc"] == float(sys.argv[2]), (e["test_acc"], sys.argv[2])
assert abs(e["test_loss"] - float(sys.argv[3])) <= 1e-6 * float(sys.argv[3]), (e["test_loss"], sys.argv[3])
m, pc = e["confusion"], e["per_class_acc"]
assert len(m) == 100 and sum(m) == e["count"] == 10000 and len(pc) == 10
assert sum(m[i * 11] for i in range(10)) == round(e["test_acc"] * 10000)
assert all(abs(pc[c] - m[c * 11] / sum(m[c * 10:c * 10 + 10])) < 1e-12 for c in range(10))
assert 0 < e["test_top5"] <= 1 and e["eval_only"] == 1 and e["step"] == 30
png = open(e["confusion_png"], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (320, 320), png[:24]
end = [e for e in map(json.loads, filter(str.strip, open(d + "/metrics.jsonl"))) if e["event"] == "end"][-1]
assert end["status"] == "completed" and end["final_test_acc"] == e["test_acc"]
print(f"ok: --eval-only reproduces test_acc {e['test_acc']} test_loss {e['test_loss']:.6f}, confusion matrix and PNG")
PY
  [ -z "$(ls "$T/run/checkpoints" | grep -v ckpt-0000000030.h5)" ] || fail "eval-only wrote into the run"
done
# --init.from loads the same weights (weights only: the evaluation is of step 0 of a new run).
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --data.train "" --eval-only --init.from "$C" \
  --run-dir "$T/evi" > "$T/evi.log" 2>&1 || { cat "$T/evi.log"; fail "--eval-only --init.from"; }
[ "$(json_field "$T/evi/metrics.jsonl" eval test_acc)" = "$acc" ] && grep -qF "evaluation of $C (step 0)" "$T/evi/log.txt" ||
  fail "--eval-only --init.from: test_acc $(json_field "$T/evi/metrics.jsonl" eval test_acc), the run's $acc"
echo "ok: --eval-only --init.from gives the same test_acc $acc"
expect_exit 2 "--eval-only needs the weights" -- "$BUILD/cnntrain" "${COMMON[@]}" --eval-only --run-dir "$T/x1"
expect_exit 2 "--eval-only needs --data.test" -- "$BUILD/cnntrain" "${COMMON[@]}" --eval-only --resume "$C" \
  --data.test "" --run-dir "$T/x2"
expect_exit 4 "no checkpoint was loaded" -- "$BUILD/cnntrain" "${COMMON[@]}" --eval-only --resume auto --run-dir "$T/x3"
echo "test_eval_only: all passed"
