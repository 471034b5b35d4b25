#!/usr/bin/env bash
# Issue 7: Fashion-MNIST trained from LMDB (converted from the HDF5 files, format auto-detected) gives exactly
# the HDF5 run's loss sequence and test result with the same seed, on 2 ranks.
source "$(dirname "$0")/../e2e/lib.bash"
for split in train test; do
  "$BUILD/tests/h5_to_lmdb" "data/fashion_mnist/$split.h5" "$E2E_TMP/$split.lmdb" >/dev/null
done
common=(--config jobs/fashion_mnist.ini --train.max_steps 30 --log.every_steps 5)
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${common[@]}" --run-dir "$E2E_TMP/h5" >/dev/null
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${common[@]}" --data.train "$E2E_TMP/train.lmdb" \
  --data.test "$E2E_TMP/test.lmdb" --run-dir "$E2E_TMP/lmdb" >/dev/null
$PY - "$E2E_TMP/h5/metrics.jsonl" "$E2E_TMP/lmdb/metrics.jsonl" <<'PY' || fail "LMDB and HDF5 runs differ"
import json, sys
def events(p, kind, keys):
    return [tuple(e[k] for k in keys) for e in map(json.loads, open(p)) if e["event"] == kind]
a, b = sys.argv[1], sys.argv[2]
train_a, train_b = events(a, "train", ("step", "loss")), events(b, "train", ("step", "loss"))
eval_a, eval_b = events(a, "eval", ("test_loss", "test_acc")), events(b, "eval", ("test_loss", "test_acc"))
if not train_a or train_a != train_b or eval_a != eval_b:
    print("HDF5:", train_a, eval_a, "\nLMDB:", train_b, eval_b, file=sys.stderr)
    sys.exit(1)
print("ok: LMDB run matches HDF5 exactly: %d loss values, test %s" % (len(train_a), eval_a[-1]))
PY
