#!/usr/bin/env bash
# Training a network given as an ONNX file (--model FILE.onnx): a residual CNN exported from PyTorch (batch
# norm kept) trains on Fashion-MNIST at np 2 to >= 85% in one epoch, its checkpoint's parameters named by the
# file's initializers (the PyTorch state_dict names); the file's weights are the initial ones unless
# --init.random true; the default exporter's file (batch norm folded, external data) trains with a warning
# that says how to keep batch norm; a file for another image shape, a missing file and a non-ONNX file exit 2.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
VPY=$(bash tests/onnx/py_venv.sh "$BUILD/pyvenv")
"$VPY" tests/onnx/export_for_training.py "$T" > "$T/export.log" 2>&1 || { cat "$T/export.log"; fail "export"; }
COMMON=(--train.batch 128 --train.lr 0.05 --train.momentum 0.9 --train.schedule cosine --log.every_steps 1000
        --data.train "$FMNIST_TRAIN" --data.test "$FMNIST_TEST" --log.tensorboard false)

"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --model "$T/resnet_bn.onnx" "${COMMON[@]}" --train.epochs 1 \
  --run-dir "$T/bn" > "$T/bn.log" 2>&1 || { cat "$T/bn.log"; fail "training resnet_bn.onnx"; }
acc=$(json_field "$T/bn/metrics.jsonl" eval test_acc)
$PY -c "import sys; sys.exit(0 if $acc >= 0.85 else 1)" || fail "resnet_bn.onnx: test_acc $acc < 0.85 after one epoch"
echo "ok: resnet_bn.onnx trains to test_acc $acc in one epoch at np 2"
ck=$(ls "$T"/bn/checkpoints/ckpt-*.h5 | tail -1)
$PY - "$ck" <<'PY' || fail "checkpoint parameter names are not the file's initializer names"
import h5py, sys
f = h5py.File(sys.argv[1], "r")
names = set()
f["params"].visit(names.add)
want = {"stem.weight", "bn0.weight", "bn0.bias", "c1.weight", "b1.weight", "c2.weight", "down.weight", "fc.weight",
        "fc.bias"}
assert want <= names, sorted(names)
assert f["buffers"]["bn0.running_mean"].shape == (16,)
assert f["params"]["stem.weight"].shape == (16, 3, 3, 1)  # KRSC
PY
echo "ok: parameters and batch-norm statistics named as PyTorch's state_dict"

# The file's weights, or fresh ones: the first step's loss differs.
first_loss() { json_field "$1/metrics.jsonl" train loss; }
for init in false true; do
  "${MPIRUN[@]}" 1 "$BUILD/cnntrain" --model "$T/resnet_bn.onnx" "${COMMON[@]}" --train.max_steps 1 \
    --log.every_steps 1 --init.random $init --run-dir "$T/init_$init" > "$T/init_$init.log" 2>&1 ||
    { cat "$T/init_$init.log"; fail "--init.random $init"; }
done
[ "$(first_loss "$T/init_false")" != "$(first_loss "$T/init_true")" ] ||
  fail "--init.random true gave the same first loss as the file's weights"
echo "ok: --init.random true draws other weights (first loss $(first_loss "$T/init_true") vs $(first_loss "$T/init_false"))"

"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --model "$T/resnet_folded.onnx" "${COMMON[@]}" --train.max_steps 20 \
  --run-dir "$T/folded" > "$T/folded.log" 2>&1 || { cat "$T/folded.log"; fail "training resnet_folded.onnx"; }
grep -q "has no BatchNormalization: the exporter folded it" "$T/folded.log" ||
  fail "no warning about the folded batch norm:\n$(cat "$T/folded.log")"
grep -q "TrainingMode.TRAINING" "$T/folded.log" || fail "the warning does not say how to keep batch norm"
echo "ok: the default exporter's file (folded batch norm, external data) trains, with the warning"

expect_exit 2 "the dataset's images are 1x28x28" -- \
  "$BUILD/cnntrain" --model "$T/rgb32.onnx" "${COMMON[@]}" --run-dir "$T/x1"
expect_exit 2 "cannot read the ONNX file" -- "$BUILD/cnntrain" --model "$T/none.onnx" "${COMMON[@]}" --run-dir "$T/x2"
echo "not a model" > "$T/junk.onnx"
expect_exit 2 "junk.onnx" -- "$BUILD/cnntrain" --model "$T/junk.onnx" "${COMMON[@]}" --run-dir "$T/x3"
echo "ok: bad model files exit 2"
