#!/usr/bin/env bash
# cnntrain-data predict (docs/models.md, "Prediction"): on the test set, a checkpoint's logits give exactly the
# training-time evaluation's accuracy (and its loss), also from an LMDB of it; an HDF5 weights export with --model gives the same logits;
# an image folder written from the test set gives the same top-1 classes, with class names, in a CSV; an older
# checkpoint without class names, mean/std and input size loads, and its image predictions ask for
# --stats-from; and the errors: missing source or input, a wrong --model, images the model cannot take.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
D="$BUILD/cnntrain-data"
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.batch 32 --train.max_steps 20 \
  --log.every_steps 1000 --run-dir "$T/run" > "$T/run.log" 2>&1 || { cat "$T/run.log"; fail "training"; }
C="$T/run/checkpoints/ckpt-0000000020.h5"
acc=$(json_field "$T/run/metrics.jsonl" eval test_acc)
loss=$(json_field "$T/run/metrics.jsonl" eval test_loss)

"$D" predict "$C" "$FMNIST_TEST" --out "$T/ckpt.h5" > "$T/p.log" || fail "predict on the test set: $(cat "$T/p.log")"
$PY - "$T/ckpt.h5" "$FMNIST_TEST" "$acc" "$loss" <<'PY' || fail "predict's logits do not reproduce the evaluation"
import sys, h5py, numpy as np
p, t = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
z, y = p["logits"][:].astype(np.float64), p["labels"][:]
assert p["logits"].dtype == np.float32 and z.shape == (len(t["labels"]), 10), z.shape
assert (y == t["labels"][:]).all()
acc = (z.argmax(1) == y).mean()
lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
loss = (lse - z[np.arange(len(y)), y]).mean()
assert acc == float(sys.argv[3]), (acc, sys.argv[3])
assert abs(loss - float(sys.argv[4])) <= 1e-5 * float(sys.argv[4]), (loss, sys.argv[4])
assert list(p.attrs["class_names"])[0] == "T-shirt/top"
print(f"ok: predict reproduces the evaluation: test_acc {acc} test_loss {loss:.6f}")
PY

# The same set as an LMDB: the same logits and labels.
"$D" convert-hdf5-lmdb --in "$FMNIST_TEST" --out "$T/test.lmdb" > /dev/null || fail "convert to LMDB"
"$D" predict "$C" "$T/test.lmdb" --out "$T/lmdb.h5" > /dev/null || fail "predict on an LMDB"
$PY -c "import h5py, numpy as np, sys
a, b = h5py.File('$T/ckpt.h5'), h5py.File('$T/lmdb.h5')
sys.exit(0 if np.array_equal(a['logits'][:], b['logits'][:]) and np.array_equal(a['labels'][:], b['labels'][:]) else 1)" ||
  fail "the LMDB's logits differ from the HDF5 file's"
echo "ok: an LMDB predicts the HDF5 file's logits"

# The weights export: the same logits through --model (the zoo name it was trained as).
"$D" export "$C" --out "$T/w.h5" > /dev/null
"$D" predict "$T/w.h5" "$FMNIST_TEST" --out "$T/w_pred.h5" --model fmnist_cnn > /dev/null || fail "predict on export"
$PY -c "import h5py, numpy as np, sys
a, b = h5py.File('$T/ckpt.h5')['logits'][:], h5py.File('$T/w_pred.h5')['logits'][:]
sys.exit(0 if np.array_equal(a, b) else 1)" || fail "the export's logits differ from the checkpoint's"
echo "ok: the HDF5 export predicts the checkpoint's logits"

# An image folder of the first 12 test images (PNG, the model's size): the same classes, named, in a CSV.
$PY - "$FMNIST_TEST" "$T/imgs" <<'PY'
import os, struct, sys, zlib, h5py
def png(path, img):
    raw = b"".join(b"\0" + bytes(r) for r in img[:, :, 0])
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    hdr = struct.pack(">IIBBBBB", img.shape[1], img.shape[0], 8, 0, 0, 0, 0)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", hdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
os.makedirs(sys.argv[2] + "/sub")
for i, img in enumerate(h5py.File(sys.argv[1])["images"][:12]):
    png(f"{sys.argv[2]}/{'sub/' if i >= 6 else ''}img{i:02d}.png", img)
PY
"$D" predict "$C" "$T/imgs" --out "$T/imgs.csv" --topk 3 > /dev/null || fail "predict on an image folder"
$PY - "$T/imgs.csv" "$T/ckpt.h5" <<'PY' || fail "image-folder predictions differ from the dataset's"
import csv, sys, h5py
rows = list(csv.DictReader(open(sys.argv[1])))
z = h5py.File(sys.argv[2])["logits"][:12]
names = list(h5py.File(sys.argv[2]).attrs["class_names"])
assert [r["path"].rsplit("/", 1)[-1] for r in rows] == [f"img{i:02d}.png" for i in range(12)]
for r, zi in zip(rows, z):
    c = int(zi.argmax())
    assert int(r["class1"]) == c and r["name1"] == names[c], (r, c)
    assert 1 >= float(r["prob1"]) >= float(r["prob2"]) >= float(r["prob3"]) > 0
print(f"ok: {len(rows)} images predicted as the dataset's samples, named ({rows[0]['name1']}, ...)")
PY
# The export records the model, classes, mean/std and input size too: images need nothing else.
"$D" predict "$T/w.h5" "$T/imgs" --out "$T/w.csv" --topk 3 > /dev/null || fail "predict images with the export"
cmp "$T/w.csv" "$T/imgs.csv" || fail "the export's image predictions differ from the checkpoint's"
"$D" predict "$C" "$T/imgs/img00.png" --out "$T/one.csv" > /dev/null || fail "predict on one image"
[ "$(wc -l < "$T/one.csv")" = 2 ] || fail "one image: $(cat "$T/one.csv")"

# An older checkpoint (no class names, mean/std, input size): datasets still predict, images need --stats-from.
cp "$C" "$T/old.h5"
$PY -c "import h5py
f = h5py.File('$T/old.h5', 'r+')
for a in ('num_classes', 'class_names', 'mean', 'std', 'input_size'): del f.attrs[a]"
"$D" predict "$T/old.h5" "$FMNIST_TEST" --out "$T/old.h5.h5" > /dev/null || fail "predict with an old checkpoint"
expect_exit 2 "--stats-from" -- "$D" predict "$T/old.h5" "$T/imgs" --out "$T/x.csv"
"$D" predict "$T/old.h5" "$T/imgs" --out "$T/old.csv" --stats-from "$FMNIST_TRAIN" > /dev/null ||
  fail "predict images with --stats-from"
[ "$(cut -d, -f2 "$T/old.csv")" = "$(cut -d, -f2 "$T/imgs.csv")" ] || fail "--stats-from: other classes"
head -2 "$T/old.csv" | matches "T-shirt\|Trouser\|Pullover\|Dress\|Coat\|Sandal\|Shirt\|Sneaker\|Bag\|Ankle" ||
  fail "--stats-from gave no class names: $(head -2 "$T/old.csv")"
echo "ok: an old checkpoint predicts datasets, and images with --stats-from"

# Errors: each names what is wrong.
expect_exit 2 "cannot read the model source" -- "$D" predict "$T/none.h5" "$FMNIST_TEST" --out "$T/e1.h5"
expect_exit 3 "does not exist" -- "$D" predict "$C" "$T/none_input.h5" --out "$T/e2.h5"
expect_exit 2 "not --model lenet5" -- "$D" predict "$C" "$FMNIST_TEST" --out "$T/e3.h5" --model lenet5
expect_exit 2 "does not fit model resnet20" -- "$D" predict "$T/w.h5" "$FMNIST_TEST" --out "$T/e4.h5" --model resnet20
expect_exit 2 "not a zoo model" -- "$D" predict "$T/w.h5" "$FMNIST_TEST" --out "$T/e5.h5" --model nosuchnet
$PY -c "import h5py, numpy as np
f = h5py.File('$T/rgb.h5', 'w'); f['images'] = np.zeros((4, 28, 28, 3), np.uint8); f['labels'] = np.zeros(4, np.int32)
f.attrs['num_classes'] = 10; f.attrs['mean'] = [0.0] * 3; f.attrs['std'] = [1.0] * 3"
expect_exit 3 "3-channel images, the model takes 1" -- "$D" predict "$C" "$T/rgb.h5" --out "$T/e6.h5"
expect_exit 2 "name an .h5" -- "$D" predict "$C" "$FMNIST_TEST" --out "$T/e7.txt"
expect_exit 2 "already exists" -- "$D" predict "$C" "$FMNIST_TEST" --out "$T/ckpt.h5"
echo "test_predict: all passed"
