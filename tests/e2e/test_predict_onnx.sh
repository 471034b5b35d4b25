#!/usr/bin/env bash
# cnntrain-data predict on an ONNX file (docs/models.md, "Prediction"): a residual CNN exported by PyTorch's
# default exporter (batch norm folded, external data) gives ONNX Runtime's logits on the Fashion-MNIST test
# set within 1e-4 relative, inputs normalised with the data's mean/std (the file records none); and a
# checkpoint of a run that trained it predicts through the graph the checkpoint stores.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
VPY=$(bash tests/onnx/py_venv.sh "$BUILD/pyvenv")
"$VPY" tests/onnx/export_for_training.py "$T" > "$T/export.log" 2>&1 || { cat "$T/export.log"; fail "export"; }
"$BUILD/cnntrain-data" predict "$T/resnet_folded.onnx" "$FMNIST_TEST" --out "$T/p.h5" > "$T/p.log" ||
  fail "predict on resnet_folded.onnx: $(cat "$T/p.log")"
# The venv has ONNX Runtime but no h5py: Debian's python hands the arrays over.
$PY -c "import h5py, numpy as np
t, p = h5py.File('$FMNIST_TEST'), h5py.File('$T/p.h5')
np.savez('$T/arrays.npz', images=t['images'][:2000], mean=t.attrs['mean'], std=t.attrs['std'],
         logits=p['logits'][:2000], labels_ok=(p['labels'][:] == t['labels'][:]).all())"
"$VPY" - "$T/resnet_folded.onnx" "$T/arrays.npz" <<'PY' || fail "predict differs from ONNX Runtime"
import sys, numpy as np, onnxruntime as ort
a = np.load(sys.argv[2])
x = (a["images"].astype(np.float32) - a["mean"].astype(np.float32)) / a["std"].astype(np.float32)
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
want = s.run(None, {s.get_inputs()[0].name: x.transpose(0, 3, 1, 2).copy()})[0]
err = np.abs(a["logits"] - want).max() / np.abs(want).max()
assert err <= 1e-4 and a["labels_ok"], err
print(f"ok: predict on an ONNX file equals ONNX Runtime (max relative error {err:.2e})")
PY
"$BUILD/cnntrain" --model "$T/resnet_bn.onnx" --config jobs/fashion_mnist.ini --train.batch 32 \
  --train.max_steps 4 --log.every_steps 1000 --run-dir "$T/run" > "$T/run.log" 2>&1 || { cat "$T/run.log"; fail "train"; }
"$BUILD/cnntrain-data" predict "$T/run/checkpoints/ckpt-0000000004.h5" "$FMNIST_TEST" --out "$T/c.h5" > "$T/c.log" ||
  fail "predict with a checkpoint of an ONNX model: $(cat "$T/c.log")"
grep -q "accuracy $(json_field "$T/run/metrics.jsonl" eval test_acc)" "$T/c.log" ||
  fail "checkpoint of an ONNX model: $(cat "$T/c.log") vs test_acc $(json_field "$T/run/metrics.jsonl" eval test_acc)"
echo "ok: a checkpoint of an imported model predicts its evaluation's accuracy"
echo "test_predict_onnx: all passed"
