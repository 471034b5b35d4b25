#!/usr/bin/env bash
# A MobileNetV2-style network (inverted residuals: depthwise convolutions, ReLU6) exported from PyTorch
# (tests/onnx/export_for_training.py: TorchScript exporter in training mode, batch norm kept) trains on
# Fashion-MNIST to >= 85% test accuracy in one epoch at np 2 (docs/models.md).
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
VPY=$(bash tests/onnx/py_venv.sh "$BUILD/pyvenv")
"$VPY" tests/onnx/export_for_training.py "$T" mobilenet_bn > "$T/export.log" 2>&1 || { cat "$T/export.log"; fail "export"; }
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --model "$T/mobilenet_bn.onnx" --train.batch 128 --train.lr 0.05 --train.momentum 0.9 \
  --train.schedule cosine --train.epochs 1 --log.every_steps 1000 --log.tensorboard false \
  --data.train "$FMNIST_TRAIN" --data.test "$FMNIST_TEST" --run-dir "$T/run" > "$T/train.log" 2>&1 ||
  { cat "$T/train.log"; fail "training mobilenet_bn.onnx"; }
acc=$(json_field "$T/run/metrics.jsonl" eval test_acc)
$PY -c "import sys; sys.exit(0 if $acc >= 0.85 else 1)" || fail "mobilenet_bn.onnx: test_acc $acc < 0.85 after one epoch"
echo "ok: mobilenet_bn.onnx trains to test_acc $acc in one epoch at np 2"
