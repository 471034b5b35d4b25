#!/usr/bin/env bash
# The dataset preparation scripts of data/ (data/README.md) on the tiny datasets of data/fixtures/: Fashion-MNIST
# as `make data` converts it, CIFAR-10's binary batches to HDF5 and LMDB, an ILSVRC-style tree with a flat val
# folder and its labels (CSV, "FILE LABEL" lines, class folders) to LMDB and HDF5 whose val labels are the
# training set's classes, also where val lacks a class; outputs newer than their inputs are kept; every missing
# or wrong input stops with exit 2 and a message naming it.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
FIX=data/fixtures
cp -r "$FIX/fashion-mnist" "$FIX/cifar-10-batches-bin" "$FIX/imagenet" "$T/"

# h5check FILE PYTHON-EXPRESSION...: each expression, with f the open file, holds.
h5check() {
  $PY - "$@" <<'PY' || fail "check of $1"
import sys, h5py, numpy as np
WNIDS = ["n01440764", "n01443537", "n01484850"]
f = h5py.File(sys.argv[1], "r")
for e in sys.argv[2:]:
    assert eval(e), f"{sys.argv[1]}: {e}"
PY
}
mtime() { stat -c %Y.%y "$@"; }

# --- Fashion-MNIST: the commands of `make data`, class names, the test set with the training set's statistics.
FM=(bash data/prepare_fashion_mnist.sh "$T/fashion-mnist" "$T/fm")
"${FM[@]}" >"$T/fm.log" 2>&1 || { cat "$T/fm.log"; fail "prepare_fashion_mnist.sh"; }
$PY - "$T/fashion-mnist" "$T/fm" <<'PY' || fail "Fashion-MNIST output"
import gzip, sys, h5py, numpy as np
src, out = sys.argv[1:]
for split, name in (("train", "train"), ("t10k", "test")):
    labels = np.frombuffer(gzip.open(f"{src}/{split}-labels-idx1-ubyte.gz").read()[8:], np.uint8)
    images = np.frombuffer(gzip.open(f"{src}/{split}-images-idx3-ubyte.gz").read()[16:], np.uint8)
    with h5py.File(f"{out}/{name}.h5", "r") as f:
        assert (f["labels"][:] == labels).all() and (f["images"][:].ravel() == images).all(), name
        assert [n.decode() if isinstance(n, bytes) else n for n in f.attrs["class_names"]][9] == "Ankle boot"
with h5py.File(f"{out}/train.h5", "r") as tr, h5py.File(f"{out}/test.h5", "r") as te:
    assert tr.attrs["mean"] == te.attrs["mean"] and tr.attrs["std"] == te.attrs["std"], "test set's stats"
PY
before=$(mtime "$T/fm/train.h5" "$T/fm/test.h5")
"${FM[@]}" | matches "up to date" || fail "a second run converted again"
[ "$(mtime "$T/fm/train.h5" "$T/fm/test.h5")" = "$before" ] || fail "a second run rewrote the outputs"
touch "$T/fashion-mnist/t10k-labels-idx1-ubyte.gz"
"${FM[@]}" >/dev/null 2>&1 || fail "prepare_fashion_mnist.sh after a changed input"
[ "$(mtime "$T/fm/train.h5" "$T/fm/test.h5")" != "$before" ] || fail "a changed input was not converted again"
echo "ok: Fashion-MNIST from IDX, kept while up to date, converted again after a change"
expect_exit 2 "$T/nowhere/train-images-idx3-ubyte.gz not found" -- \
  bash data/prepare_fashion_mnist.sh "$T/nowhere" "$T/x"
expect_exit 2 "$T/nobuild/cnntrain-data not found; build it with make" -- \
  env BUILD="$T/nobuild" bash data/prepare_fashion_mnist.sh "$T/fashion-mnist" "$T/x"

# --- CIFAR-10: 5 training batches of 2 records and a test batch of 3 (pixel = 20*label + 8*channel + row + k).
C10=(bash data/prepare_cifar10.sh "$T/cifar-10-batches-bin" "$T/c10")
FORMAT=lmdb "${C10[@]}" >"$T/c10.log" 2>&1 || { cat "$T/c10.log"; fail "prepare_cifar10.sh"; }
$PY - "$T/cifar-10-batches-bin" "$T/c10" <<'PY' || fail "CIFAR-10 output"
import sys, h5py, numpy as np
src, out = sys.argv[1:]
k = 0
for name, files in (("train", [f"data_batch_{b}.bin" for b in range(1, 6)]), ("test", ["test_batch.bin"])):
    rec = np.concatenate([np.fromfile(f"{src}/{x}", np.uint8).reshape(-1, 3073) for x in files])
    with h5py.File(f"{out}/{name}.h5", "r") as f:
        assert (f["labels"][:] == rec[:, 0]).all(), name
        img = f["images"][:]
        for i, label in enumerate(rec[:, 0]):
            for c in range(3):
                assert (img[i, :, 5, c] == 20 * label + 8 * c + np.arange(32) + k).all(), (name, i, c)
            k += 1
        assert f.attrs["num_classes"] == 10 and f.attrs["class_names"][3] in (b"cat", "cat")
with h5py.File(f"{out}/train.h5", "r") as tr, h5py.File(f"{out}/test.h5", "r") as te:
    assert (tr.attrs["mean"] == te.attrs["mean"]).all() and (tr.attrs["std"] == te.attrs["std"]).all()
PY
"$BUILD/cnntrain-data" inspect "$T/c10/train.lmdb" | matches "10 samples of 32x32x3" || fail "train.lmdb"
"$BUILD/cnntrain-data" inspect "$T/c10/test.lmdb" | matches "3 samples of 32x32x3" || fail "test.lmdb"
diff <(grep '^mean\|^std' "$T/c10/train.lmdb/cnntrain_meta.txt") \
  <(grep '^mean\|^std' "$T/c10/test.lmdb/cnntrain_meta.txt") || fail "test.lmdb without the training set's stats"
FORMAT=lmdb "${C10[@]}" | matches "up to date" || fail "a second CIFAR-10 run converted again"
echo "ok: CIFAR-10 binaries to HDF5 (labels, pixels in HWC, class names, stats) and LMDB"
rm "$T/cifar-10-batches-bin/data_batch_3.bin"
expect_exit 2 "$T/cifar-10-batches-bin/data_batch_3.bin not found; unpack cifar-10-binary.tar.gz" -- "${C10[@]}"
expect_exit 2 "usage: prepare_cifar10.sh BATCHES_DIR" -- bash data/prepare_cifar10.sh

# --- ImageNet-style: train/<wnid>/ (3 classes, 2 images each, two sizes), flat val/ labelled with classes 0 and 2.
IN=$T/imagenet
WNIDS=(n01440764 n01443537 n01484850)
# val_labels_ok LMDB: the val set holds 2 images of classes 0 and 2 and none of class 1, and every record's
# label is the class its key (CLASS/FILE, the folder it was converted from) names.
val_labels_ok() {
  local out
  out=$("$BUILD/cnntrain-data" inspect "$1" --first 4)
  grep -q "4 samples of .*, 3 classes" <<<"$out" || fail "$1: $out"
  for h in "0 (n01440764): 2" "1 (n01443537): 0" "2 (n01484850): 2"; do
    grep -qF "    $h" <<<"$out" || fail "$1: no '$h' in the histogram: $out"
  done
  local n=0 key label
  while read -r key label; do
    [ "$key" = "${WNIDS[$label]}" ] || fail "$1: a record of $key has label $label"
    n=$((n + 1))
  done < <(sed -n "s/.* key '[0-9]*_\([^/]*\)\/.*, label \([0-9]\).*/\1 \2/p" <<<"$out")
  [ $n = 4 ] || fail "$1: $n labelled records in $out"
}
IM=(bash data/prepare_imagenet_folder.sh "$IN")
"${IM[@]}" "$T/in" >"$T/in.log" 2>&1 || { cat "$T/in.log"; fail "prepare_imagenet_folder.sh"; }
"$BUILD/cnntrain-data" inspect "$T/in/train.lmdb" | matches "6 samples of .*, 3 classes" || fail "train.lmdb"
val_labels_ok "$T/in/val.lmdb"
[ "$(ls -A "$T/in" | tr '\n' ' ')" = ".settings train.lmdb val.lmdb " ] || fail "left behind: $(ls -A "$T/in")"
echo "ok: flat val/ with LOC_val_solution.csv to encoded LMDB, class 2 keeps its label without val images of class 1"

train_time=$(mtime "$T/in/train.lmdb") val_time=$(mtime "$T/in/val.lmdb")
[ "$("${IM[@]}" "$T/in" | grep -c "up to date")" = 2 ] || fail "a second run converted again"
touch "$IN/LOC_val_solution.csv"
"${IM[@]}" "$T/in" >/dev/null 2>&1 || fail "prepare_imagenet_folder.sh after new labels"
[ "$(mtime "$T/in/train.lmdb")" = "$train_time" ] || fail "new val labels converted the training set again"
[ "$(mtime "$T/in/val.lmdb")" != "$val_time" ] || fail "new val labels did not convert the val set again"
SIZE=8x8 "${IM[@]}" "$T/in" >/dev/null 2>&1 || fail "SIZE=8x8"
[ "$(mtime "$T/in/train.lmdb")" != "$train_time" ] || fail "another SIZE did not convert the training set again"
"$BUILD/cnntrain-data" inspect "$T/in/train.lmdb" | matches "records: raw" || fail "SIZE=8x8 did not store pixels"
diff <(grep '^mean\|^std' "$T/in/train.lmdb/cnntrain_meta.txt") \
  <(grep '^mean\|^std' "$T/in/val.lmdb/cnntrain_meta.txt") || fail "val.lmdb without the training set's stats"
val_labels_ok "$T/in/val.lmdb"
echo "ok: kept while up to date; new labels convert val only; SIZE converts both, val with the training stats"

# HDF5: the val labels checked against the pixels (class c is bright in channel c), not the converter's books.
FORMAT=hdf5 SIZE=8x8 "${IM[@]}" "$T/h5" >/dev/null 2>&1 || fail "FORMAT=hdf5"
h5check "$T/h5/train.h5" 'f["images"].shape == (6, 8, 8, 3)' 'list(f["labels"]) == [0, 0, 1, 1, 2, 2]'
h5check "$T/h5/val.h5" 'f["images"].shape == (4, 8, 8, 3)' 'f.attrs["num_classes"] == 3' \
  '(f["images"][:].reshape(4, -1, 3).mean(1).argmax(1) == f["labels"][:]).all()' \
  'sorted(f["labels"]) == [0, 0, 2, 2]' \
  '(f.attrs["mean"] == h5py.File(sys.argv[1][:-len("val.h5")] + "train.h5", "r").attrs["mean"]).all()' \
  '[n.decode() if isinstance(n, bytes) else n for n in f.attrs["class_names"]] == WNIDS'
echo "ok: FORMAT=hdf5: every val image's label is its colour's class; class names and stats from train"

# "FILE LABEL" lines (a class name or its index, as Caffe's val.txt), and val/ already in class folders.
printf '%s\n' "ILSVRC2012_val_00000003.JPEG 2" "ILSVRC2012_val_00000001.JPEG n01440764" \
  "ILSVRC2012_val_00000002.JPEG n01484850" "ILSVRC2012_val_00000004.JPEG 0" >"$T/val.txt"
VAL_LABELS=$T/val.txt "${IM[@]}" "$T/txt" >/dev/null 2>&1 || fail "VAL_LABELS=val.txt"
val_labels_ok "$T/txt/val.lmdb"
mkdir -p "$T/cf/val/n01440764" "$T/cf/val/n01484850"
ln -s "$IN/train" "$T/cf/train"
cp "$IN"/val/ILSVRC2012_val_0000000{1,4}.JPEG "$T/cf/val/n01440764/"
cp "$IN"/val/ILSVRC2012_val_0000000{2,3}.JPEG "$T/cf/val/n01484850/"
bash data/prepare_imagenet_folder.sh "$T/cf" "$T/cfout" >/dev/null 2>&1 || fail "val/ in class folders"
val_labels_ok "$T/cfout/val.lmdb"
echo "ok: labels as FILE LABEL lines and as class folders"

# Bad inputs: exit 2 naming the file, the line or the setting, before any conversion.
bad() { printf '%s\n' "$@" >"$T/bad.txt"; }
bad "ILSVRC2012_val_00000001.JPEG n99999999"
expect_exit 2 "$T/bad.txt:1: 'n99999999' is neither a class folder of train/ nor a class index below 3" -- \
  env VAL_LABELS="$T/bad.txt" "${IM[@]}" "$T/x"
bad "ILSVRC2012_val_00000001.JPEG 0" "ILSVRC2012_val_00000002.JPEG 2" "ILSVRC2012_val_00000003.JPEG 2"
expect_exit 2 "ILSVRC2012_val_00000004.JPEG has no label in $T/bad.txt" -- env VAL_LABELS="$T/bad.txt" "${IM[@]}" "$T/x"
bad "ILSVRC2012_val_00000009.JPEG 0"
expect_exit 2 "$T/bad.txt:1: $IN/val/ILSVRC2012_val_00000009.JPEG not found" -- \
  env VAL_LABELS="$T/bad.txt" "${IM[@]}" "$T/x"
bad "ILSVRC2012_val_00000001.JPEG 0" "ILSVRC2012_val_00000001.JPEG 2"
expect_exit 2 "$T/bad.txt:2: ILSVRC2012_val_00000001.JPEG is labelled twice" -- \
  env VAL_LABELS="$T/bad.txt" "${IM[@]}" "$T/x"
expect_exit 2 "$T/none.csv not found; a flat $IN/val needs its labels" -- env VAL_LABELS="$T/none.csv" "${IM[@]}" "$T/x"
mkdir "$T/empty"
ln -s "$IN/train" "$T/empty/train"
mkdir "$T/empty/val"
expect_exit 2 "$T/empty/val holds neither images" -- env VAL_LABELS="$T/val.txt" bash data/prepare_imagenet_folder.sh \
  "$T/empty" "$T/x"
expect_exit 2 "FORMAT=hdf5 needs SIZE=HxW" -- env FORMAT=hdf5 "${IM[@]}" "$T/x"
expect_exit 2 "$T/nowhere/train not found" -- bash data/prepare_imagenet_folder.sh "$T/nowhere" "$T/x"
mkdir "$T/cf/val/n00000000"
expect_exit 2 "$T/cf/val/n00000000 is not a class of $T/cf/train" -- bash data/prepare_imagenet_folder.sh "$T/cf" "$T/x"
[ "$(ls -A "$T/x")" = .settings ] || fail "failed runs converted something: $(ls -A "$T/x")"
echo "ok: data scripts"
