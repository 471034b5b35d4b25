#!/usr/bin/env bash
# Issue 27's recipe: `make run`'s training (jobs/fashion_mnist.ini, mpirun -np 2) with the weights' moving
# average and random rotation, `--train.ema 0.999 --augment.rotate 15`, still reaches >= 90% test accuracy,
# and every eval event reports the average's accuracy (ema_test_acc) and top-5 (test_top5, ema_test_top5).
source "$(dirname "$0")/lib.bash"
run="$E2E_TMP/run"
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.ema 0.999 --augment.rotate 15 \
  --log.every_steps 500 --log.tensorboard false --checkpoint.at_end false --run-dir "$run" > "$run.log" 2>&1 ||
  fail "the recipe failed:\n$(tail -20 "$run.log")"
[ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "end event status != completed"
$PY - "$run/metrics.jsonl" <<'PY' || fail "eval events of the recipe (above)"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [e for e in events if e["event"] == "eval"]
assert evals, "no eval event"
for e in evals:
    for k in ("test_acc", "test_top5", "ema_test_acc", "ema_test_top5"):
        assert k in e, f"eval event at step {e.get('step')} lacks {k}"
    assert e["test_acc"] <= e["test_top5"] <= 1, e
last = evals[-1]
print(f"final eval: test_acc {last['test_acc']:.4f} ema_test_acc {last['ema_test_acc']:.4f} "
      f"test_top5 {last['test_top5']:.4f} ({len(evals)} eval events)")
assert last["test_acc"] >= 0.90, f"test accuracy {last['test_acc']} < 0.90"
PY
echo "ok: make run's recipe with --train.ema 0.999 --augment.rotate 15 reaches >= 90%"
