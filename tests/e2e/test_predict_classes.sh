#!/usr/bin/env bash
# Datasets that agree (docs/data.md): a test folder that lacks one of the training set's classes, converted on
# its own, gets other labels and other class names, and training refuses the pair (exit 3, naming both
# lists); converted with --classes-from TRAIN (and --stats-from TRAIN) it keeps the training set's labels,
# names and statistics, and trains; a folder the training set lacks is refused.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
D="$BUILD/cnntrain-data"
SRC=data/fixtures/imagenet/train
mkdir -p "$T/test"
cp -r "$SRC"/n01440764 "$SRC"/n01484850 "$T/test/"  # n01443537, the training set's class 1, is missing
"$D" convert-folder "$SRC" --out "$T/train.h5" --format hdf5 --size 32x32 > /dev/null || fail "convert train"
"$D" convert-folder "$T/test" --out "$T/own.h5" --format hdf5 --size 32x32 > /dev/null || fail "convert test"
RUN=(--model lenet5 --train.batch 2 --train.max_steps 2 --eval.batch 2 --data.train "$T/train.h5")
expect_exit 3 "3 classes: n01440764, n01443537, n01484850; the test set has 2 classes: n01440764, n01484850" -- \
  "$BUILD/cnntrain" "${RUN[@]}" --data.test "$T/own.h5" --run-dir "$T/r1"

"$D" convert-folder "$T/test" --out "$T/test.h5" --format hdf5 --size 32x32 --classes-from "$T/train.h5" \
  --stats-from "$T/train.h5" > /dev/null || fail "convert test --classes-from"
$PY - "$T/train.h5" "$T/test.h5" <<'PY' || fail "--classes-from/--stats-from: the test set differs"
import sys, h5py
tr, te = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert list(te.attrs["class_names"]) == list(tr.attrs["class_names"]) and te.attrs["num_classes"] == 3
assert sorted(set(te["labels"][:])) == [0, 2], te["labels"][:]  # n01484850 keeps label 2
assert (te.attrs["mean"] == tr.attrs["mean"]).all() and (te.attrs["std"] == tr.attrs["std"]).all()
print("ok: --classes-from keeps the training labels and names, --stats-from its mean/std")
PY
"$BUILD/cnntrain" "${RUN[@]}" --data.test "$T/test.h5" --run-dir "$T/r2" > "$T/r2.log" 2>&1 ||
  { cat "$T/r2.log"; fail "training with the agreeing test set"; }
mkdir -p "$T/test/n99999999" && cp "$SRC"/n01440764/*_1.JPEG "$T/test/n99999999/"
expect_exit 3 "n99999999 is not a class of the training set" -- \
  "$D" convert-folder "$T/test" --out "$T/bad.h5" --format hdf5 --size 32x32 --classes-from "$T/train.h5"
echo "test_predict_classes: all passed"
