#!/usr/bin/env bash
# Frozen parameters keep no optimizer state and get no update (docs/models.md "Fine-tuning"), on fmnist_resnet
# with AdamW, weight decay and gradient clipping, on 1024 Fashion-MNIST images (8 steps an epoch):
# - a frozen tensor inside the trained part (layer1.0.conv1, with conv1 below it training) at np 2: byte-identical
#   to its initial value, zero optimizer state in the checkpoint, left out of the gradient allreduce (log);
# - progressive unfreezing (--train.unfreeze_at_epoch 1) stopped in epoch 1 and resumed gives exactly the
#   uninterrupted run (the optimizer state of what trained in epoch 0 survives the checkpoint although it was
#   laid out for fewer parameters), and a run stopped at np 2 while frozen resumes at np 1 and unfreezes.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
$PY - "$FMNIST_TEST" "$T/small.h5" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "w") as g:
    g.create_dataset("images", data=f["images"][:1024], chunks=(64,) + f["images"].shape[1:])
    g.create_dataset("labels", data=f["labels"][:1024])
    for k, v in f.attrs.items():
        g.attrs[k] = v
PYEOF
common=(--config jobs/fashion_mnist.ini --model fmnist_resnet --data.train "$T/small.h5" --data.test "" --train.batch 128
        --train.optimizer adamw --train.lr 0.002 --train.weight_decay 0.05 --train.clip_norm 0.5
        --train.warmup_epochs 0 --log.every_steps 4)
last() { ls "$1"/checkpoints/ckpt-*.h5 | tail -1; }

# same A.h5 B.h5 NAME...: the datasets bit for bit equal; zero A.h5 NAME...: all zero; nonzero likewise.
h5check() {
  $PY - "$@" <<'PYEOF'
import sys, h5py, numpy as np
what = sys.argv[1]
if what == "same":
    a, b = (h5py.File(p, "r") for p in sys.argv[2:4])
    for n in sys.argv[4:]:
        if a[n][()].tobytes() != b[n][()].tobytes():
            sys.exit(f"{n} differs: {sys.argv[2]} vs {sys.argv[3]}")
else:
    f = h5py.File(sys.argv[2], "r")
    for n in sys.argv[3:]:
        if (what == "zero") != (not np.any(f[n][()])):
            sys.exit(f"{n} in {sys.argv[2]} is {'not ' if what == 'zero' else ''}all zero")
PYEOF
}

# The initial weights: a run whose stem and layer1 are frozen before anything trains (never computed).
"$BUILD/cnntrain" "${common[@]}" --train.max_steps 1 --train.freeze conv1,bn1,layer1 --run-dir "$T/init" > /dev/null
w=params/layer1.0.conv1.weight
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${common[@]}" --train.epochs 1 --train.freeze layer1.0.conv1 \
  --run-dir "$T/inside" > /dev/null
h5check same "$(last "$T/init")" "$(last "$T/inside")" $w || fail "frozen layer1.0.conv1 changed in training"
h5check zero "$(last "$T/inside")" optimizer/exp_avg/layer1.0.conv1.weight optimizer/exp_avg_sq/layer1.0.conv1.weight ||
  fail "frozen layer1.0.conv1 has optimizer state"
h5check nonzero "$(last "$T/inside")" optimizer/exp_avg/conv1.weight optimizer/exp_avg/layer1.0.conv2.weight ||
  fail "the trained neighbours of the frozen tensor have no optimizer state"
h5check same "$(last "$T/init")" "$(last "$T/inside")" params/conv1.weight 2>/dev/null &&
  fail "conv1, below the frozen tensor, did not train"
grep -q "the first 0 parameters are neither computed nor allreduced, 9216 more above them not allreduced" \
  "$T/inside/log.txt" || fail "the log does not report layer1.0.conv1 (9216 values) left out of the allreduce: \
$(grep 'frozen (' "$T/inside/log.txt")"
echo "ok: a frozen tensor inside the trained part at np 2: unchanged, no optimizer state, not allreduced"

# Progressive unfreezing, uninterrupted and stopped at step 10 (epoch 1, unfrozen since step 8), at np 1.
unf=(--train.epochs 2 --train.freeze conv1,bn1,layer1 --train.unfreeze_at_epoch 1)
"$BUILD/cnntrain" "${common[@]}" "${unf[@]}" --run-dir "$T/straight" > /dev/null
"$BUILD/cnntrain" "${common[@]}" "${unf[@]}" --train.stop_at_step 10 --run-dir "$T/stopped" > /dev/null
"$BUILD/cnntrain" --config "$T/stopped/config.ini" --resume auto --run-dir "$T/stopped" > /dev/null
names=$($PY -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); print(' '.join(
    g + '/' + n for g in ('params', 'optimizer/exp_avg', 'optimizer/exp_avg_sq') for n in f[g]))" "$(last "$T/straight")")
h5check same "$(last "$T/straight")" "$(last "$T/stopped")" $names ||
  fail "unfreezing, stopped in epoch 1 and resumed, differs from the uninterrupted run"
echo "ok: stopped after unfreezing and resumed: parameters and optimizer state bit for bit the uninterrupted run's"

# Stopped at np 2 while frozen (step 4), resumed at np 1: unfreezes at epoch 1 and completes.
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${common[@]}" "${unf[@]}" --train.stop_at_step 4 --run-dir "$T/ranks" > /dev/null
h5check zero "$(last "$T/ranks")" optimizer/exp_avg/layer1.0.conv1.weight || fail "frozen layer1 has optimizer state"
"$BUILD/cnntrain" --config "$T/ranks/config.ini" --resume auto --run-dir "$T/ranks" > /dev/null
[ "$(json_field "$T/ranks/metrics.jsonl" end status)" = completed ] || fail "the resumed run did not complete"
grep -q "epoch 1: every parameter trains from now on" "$T/ranks/log.txt" || fail "no unfreezing after the resume"
h5check nonzero "$(last "$T/ranks")" optimizer/exp_avg/layer1.0.conv1.weight || fail "unfrozen layer1 has no state"
echo "ok: stopped at np 2 while frozen, resumed at np 1, unfrozen at epoch 1"
