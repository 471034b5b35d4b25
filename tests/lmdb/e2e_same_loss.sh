#!/usr/bin/env bash
# Fashion-MNIST trained from LMDB (converted from the HDF5 files, format auto-detected) gives exactly
# the HDF5 run's loss sequence and test result with the same seed, on 2 ranks.
source "$(dirname "$0")/../e2e/lib.bash"
for split in train test; do
  "$BUILD/cnntrain-data" convert-hdf5-lmdb --in "data/fashion_mnist/$split.h5" --out "$E2E_TMP/$split.lmdb" >/dev/null
done
# The IDX -> LMDB path of the CLI gives the same records as IDX -> HDF5 -> LMDB.
"$BUILD/cnntrain-data" convert-idx --format lmdb --images "$FMNIST_IDX/t10k-images-idx3-ubyte.gz" \
  --labels "$FMNIST_IDX/t10k-labels-idx1-ubyte.gz" --out "$E2E_TMP/idx.lmdb" >/dev/null
"$BUILD/cnntrain-data" inspect "$E2E_TMP/idx.lmdb" | matches "10000" || fail "inspect of the IDX LMDB"
"$BUILD/cnntrain-data" convert-lmdb-hdf5 --in "$E2E_TMP/idx.lmdb" --out "$E2E_TMP/back.h5" >/dev/null
$PY - "$E2E_TMP/back.h5" data/fashion_mnist/test.h5 <<'PY' || fail "IDX -> LMDB -> HDF5 differs from IDX -> HDF5"
import h5py, numpy as np, sys
a, b = (h5py.File(p) for p in sys.argv[1:3])
assert np.array_equal(a["images"][()].reshape(b["images"].shape), b["images"][()])
assert np.array_equal(a["labels"][()], b["labels"][()])
PY
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
