#!/usr/bin/env bash
# ResNet-20 on a generated CIFAR-10-format dataset: cnntrain-data convert-cifar, then mpirun -np 2 with the
# recipe features (crop+flip, multistep schedule, nesterov) trains and the loss falls; the recipe's bad
# options exit with code 2.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
$PY - "$T" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(5)
def make(path, n):
    labels = rng.integers(0, 10, n).astype(np.uint8)
    img = rng.integers(0, 60, (n, 3, 32, 32)).astype(np.uint8)
    for i, l in enumerate(labels):  # class l: a bright band at rows 3l..3l+2 in channel l % 3
        img[i, l % 3, 3 * l:3 * l + 3, :] = 250
    rec = np.concatenate([labels[:, None], img.reshape(n, -1)], axis=1)
    rec.tofile(path)
make(f"{d}/data_batch_1.bin", 192)
make(f"{d}/data_batch_2.bin", 64)
make(f"{d}/test_batch.bin", 64)
PY
"$BUILD/cnntrain-data" convert-cifar --input "$T/data_batch_1.bin,$T/data_batch_2.bin" --out "$T/train.h5"
"$BUILD/cnntrain-data" convert-cifar --input "$T/test_batch.bin" --out "$T/test.h5" --stats-from "$T/train.h5"
"$BUILD/cnntrain-data" inspect "$T/train.h5" | matches "256 samples of 32x32x3" || fail "converted train set"

CN=("${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/cifar10_resnet20.ini --data.train "$T/train.h5"
    --data.test "$T/test.h5" --train.batch 32 --eval.batch 32)
run="$T/run"
timeout 300 "${CN[@]}" --train.epochs 3 --train.milestones 2 --train.warmup_epochs 0 --log.every_steps 4 \
  --run-dir "$run" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "resnet20 run failed"; }
grep -q "model resnet20: 269722 parameters" "$T/out.txt" || fail "resnet20 parameter count not in the log"
[ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "end status"
$PY - "$run/metrics.jsonl" <<'PY' || fail "loss did not fall"
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
print("losses", [round(e["loss"], 3) for e in tr], "lr", [round(e["lr"], 4) for e in tr])
assert tr[-1]["loss"] < 0.8 * tr[0]["loss"]
assert abs(tr[-1]["lr"] - 0.01) < 1e-9  # multistep: lr 0.1 * gamma after epoch 2
PY
expect_exit 2 "--train.schedule" -- "${CN[@]}" --train.schedule exponential
expect_exit 2 "--train.lr" -- "${CN[@]}" --train.lr -0.1
expect_exit 2 "unknown model" -- "${CN[@]}" --model resnet21
# 32 is a divisor of the global batch but not of the per-rank batch 16.
expect_exit 2 "not divisible by 32 micro-batches" -- "${CN[@]}" --train.accum_steps 32
echo "ok: resnet20 on CIFAR-format data"
