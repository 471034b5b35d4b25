#!/usr/bin/env bash
# A checkpoint of an imported model is self-contained (docs/checkpoints.md, "The model's graph"): a run of an
# ONNX file stopped at step 4 resumes with the file gone and logs the same losses as the uninterrupted run;
# resuming with another model is refused with exit 4 naming both (another file with another graph, a zoo
# model against the file's checkpoints, the file against a zoo model's); a checkpoint without the stored input
# shape (as written before it was stored) still resumes; the export of the run's checkpoint needs no file; and
# with the file gone and every checkpoint damaged the run stops (exit 4) instead of starting without weights.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
VPY=$(bash tests/onnx/py_venv.sh "$BUILD/pyvenv")
"$VPY" tests/onnx/export_for_training.py "$T" > "$T/export.log" 2>&1 || { cat "$T/export.log"; fail "export"; }
"$VPY" - "$T/other.onnx" <<'PY' > "$T/other.log" 2>&1 || { cat "$T/other.log"; fail "export other.onnx"; }
import sys, torch, torch.nn as nn
net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 28 * 28, 10))
torch.onnx.export(net, (torch.randn(2, 1, 28, 28),), sys.argv[1], dynamo=False, opset_version=17,
                  input_names=["x"], dynamic_axes={"x": {0: "N"}})
PY
COMMON=(--data.synthetic 256x28x28x1:10 --data.test "" --train.batch 32 --train.max_steps 8 --train.lr 0.05
        --log.every_steps 1 --log.tensorboard false --checkpoint.every_steps 4)
losses() { $PY -c 'import json,sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["event"] == "train" and e["step"] > 4: print(e["step"], e["loss"])' "$1/metrics.jsonl" | sort -n | uniq; }

cp "$T/resnet_bn.onnx" "$T/net.onnx"
"$BUILD/cnntrain" --model "$T/net.onnx" "${COMMON[@]}" --run-dir "$T/full" > "$T/full.log" 2>&1 ||
  { cat "$T/full.log"; fail "uninterrupted run"; }
"$BUILD/cnntrain" --model "$T/net.onnx" "${COMMON[@]}" --run-dir "$T/cut" --train.stop_at_step 4 > "$T/cut.log" 2>&1 ||
  { cat "$T/cut.log"; fail "run stopped at step 4"; }
$PY -c 'import h5py, sys
f = h5py.File(sys.argv[1], "r")
assert f["graph"].dtype == "uint8" and list(f.attrs["net_input"]) == [28, 28, 1]' \
  "$T/cut/checkpoints/ckpt-0000000004.h5" || fail "the checkpoint stores no graph or input shape"

# Refused before anything changes: another file's graph, a zoo model.
expect_exit 4 "graph differs from that of --model $T/other.onnx" -- \
  "$BUILD/cnntrain" --model "$T/other.onnx" "${COMMON[@]}" --run-dir "$T/cut" --resume auto
expect_exit 4 "$T/net.onnx" -- "$BUILD/cnntrain" --model fmnist_cnn "${COMMON[@]}" --run-dir "$T/cut" --resume auto

mv "$T/net.onnx" "$T/gone.onnx"
"$BUILD/cnntrain" --config "$T/cut/config.ini" --run-dir "$T/cut" --resume auto > "$T/resume.log" 2>&1 ||
  { cat "$T/resume.log"; fail "resume without the ONNX file"; }
grep -q "is gone: the network is built from the graph that checkpoint" "$T/cut/log.txt" ||
  fail "the resume does not say where the graph came from:\n$(cat "$T/resume.log")"
[ "$(losses "$T/full")" = "$(losses "$T/cut")" ] && [ -n "$(losses "$T/full")" ] ||
  fail "losses after the resume differ:\n$(losses "$T/full")\n--\n$(losses "$T/cut")"
echo "ok: resumed without the ONNX file, steps 5-8 lose exactly as the uninterrupted run"
"$BUILD/cnntrain-data" export "$T/cut/checkpoints/ckpt-0000000008.h5" --format onnx --out "$T/cut.onnx" > /dev/null ||
  fail "export of the run without its file"
echo "ok: exported without the ONNX file"
# With the file gone and no checkpoint that verifies, there are no initial weights to start from scratch.
cp -r "$T/cut" "$T/damaged"
for ck in "$T"/damaged/checkpoints/*.h5; do
  $PY -c 'import h5py, sys
f = h5py.File(sys.argv[1], "r+")
d = f["params"][sorted(f["params"])[0]]
d[...] = d[...] + 1' "$ck"
done
expect_exit 4 "is gone: restore the file" -- "$BUILD/cnntrain" --config "$T/damaged/config.ini" --run-dir "$T/damaged" \
  --resume auto

# A zoo model's run against the file; a checkpoint without the input shape (an older one) resumes.
"$BUILD/cnntrain" --model fmnist_cnn "${COMMON[@]}" --run-dir "$T/zoo" --train.stop_at_step 4 > "$T/zoo.log" 2>&1 ||
  { cat "$T/zoo.log"; fail "zoo run"; }
mv "$T/gone.onnx" "$T/net.onnx"
expect_exit 4 "belongs to model fmnist_cnn" -- \
  "$BUILD/cnntrain" --model "$T/net.onnx" "${COMMON[@]}" --run-dir "$T/zoo" --resume auto
$PY -c 'import h5py,sys; f=h5py.File(sys.argv[1], "r+"); del f.attrs["net_input"]; del f.attrs["num_classes"]' \
  "$T/zoo/checkpoints/ckpt-0000000004.h5"
"$BUILD/cnntrain" --config "$T/zoo/config.ini" --run-dir "$T/zoo" --resume auto > "$T/zoo2.log" 2>&1 ||
  { cat "$T/zoo2.log"; fail "resume of a checkpoint without the stored input shape"; }
grep -q "resumed from" "$T/zoo/log.txt" || fail "did not resume the older checkpoint"
echo "ok: a checkpoint without the stored input shape still resumes"
