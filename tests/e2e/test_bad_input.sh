#!/usr/bin/env bash
# Bad input: each case exits with its documented code and a message naming the problem, without hanging,
# also under mpirun -np 2.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
CN=("$BUILD/cnntrain" --data.test "" --train.max_steps 2 --run-dir "$T/run")
NP2=("${MPIRUN[@]}" 2 "${CN[@]}")

$PY - "$T" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
def make(name, images=True, labels=True, img_dtype=np.uint8, img_shape=(64, 8, 8, 1), lab=None, nc=10):
    with h5py.File(f"{d}/{name}", "w") as f:
        if images: f["images"] = np.ones(img_shape, dtype=img_dtype)
        if labels: f["labels"] = lab if lab is not None else (np.arange(img_shape[0]) % nc).astype(np.int32)
        f.attrs["num_classes"] = nc
        f.attrs["mean"] = [1.0]; f.attrs["std"] = [1.0]
make("noimages.h5", images=False)
make("nolabels.h5", labels=False)
make("float.h5", img_dtype=np.float32)
make("rank2.h5", img_shape=(64, 64))
make("badlabel.h5", lab=np.full(64, 10, dtype=np.int32))
make("count.h5", lab=np.zeros(63, dtype=np.int32))
make("good.h5")
PY
echo "not an HDF5 file" > "$T/text.h5"
head -c 3000 "$T/good.h5" > "$T/truncated.h5"

expect_exit 3 "does not exist" -- "${NP2[@]}" --data.train "$T/missing.h5"
expect_exit 3 "not an HDF5 file" -- "${NP2[@]}" --data.train "$T/text.h5"
expect_exit 3 "truncated.h5" -- "${NP2[@]}" --data.train "$T/truncated.h5"
expect_exit 3 "no dataset '/images'" -- "${NP2[@]}" --data.train "$T/noimages.h5"
expect_exit 3 "no dataset '/labels'" -- "${CN[@]}" --data.train "$T/nolabels.h5"
expect_exit 3 "must be uint8" -- "${CN[@]}" --data.train "$T/float.h5"
expect_exit 3 "has rank 2" -- "${CN[@]}" --data.train "$T/rank2.h5"
expect_exit 3 "label 10 of sample 0" -- "${NP2[@]}" --data.train "$T/badlabel.h5"
expect_exit 3 "64 images but 63 labels" -- "${CN[@]}" --data.train "$T/count.h5"
expect_exit 2 "not divisible by the 2 ranks" -- "${NP2[@]}" --data.train "$T/good.h5" --model lenet5 --train.batch 7
expect_exit 3 "fewer than one global batch" -- "${CN[@]}" --data.train "$T/good.h5" --train.batch 128
expect_exit 2 "no-such-thing" -- "${NP2[@]}" --data.train "$T/good.h5" --no-such-thing 3
expect_exit 2 "--train.lr" -- "${NP2[@]}" --data.train "$T/good.h5" --train.lr fast
expect_exit 2 "--config" -- "${CN[@]}" --config "$T/nope.ini"
expect_exit 2 "unknown model" -- "${CN[@]}" --data.train "$T/good.h5" --model resnet9000
# A model whose layers do not fit the images is a configuration error, not a crash.
expect_exit 2 "does not fit" -- "${CN[@]}" --data.train "$T/good.h5" --model lenet5 --train.batch 8
# An evaluation resize smaller than the center crop is refused before training, naming the option.
expect_exit 2 "option --data.test_resize 12: 8x8 images resize to 12x12, smaller than the 16x16 center crop" -- \
  "${NP2[@]}" --data.train "$T/good.h5" --data.test "$T/good.h5" --train.batch 8 --data.image_size 16x16 \
  --data.test_resize 12
# The good file trains (sanity check that the cases above fail for the stated reason).
expect_exit 0 "completed" -- "${NP2[@]}" --data.train "$T/good.h5" --model fmnist_cnn --train.batch 8
echo "ok: bad input cases"

# Converters never replace an output silently: an existing one is refused (exit 2, naming --overwrite).
D=("$BUILD/cnntrain-data")
"${D[@]}" convert-hdf5-lmdb --in "$T/good.h5" --out "$T/good.lmdb" > /dev/null || fail "convert-hdf5-lmdb"
expect_exit 2 "pass --overwrite" -- "${D[@]}" convert-hdf5-lmdb --in "$T/good.h5" --out "$T/good.lmdb"
"${D[@]}" convert-lmdb-hdf5 --in "$T/good.lmdb" --out "$T/back.h5" > /dev/null || fail "convert-lmdb-hdf5"
expect_exit 2 "'$T/back.h5' already exists; pass --overwrite" -- \
  "${D[@]}" convert-lmdb-hdf5 --in "$T/good.lmdb" --out "$T/back.h5"
"${D[@]}" convert-lmdb-hdf5 --in "$T/good.lmdb" --out "$T/back.h5" --overwrite > /dev/null || fail "--overwrite"
IDX=(--images "$FMNIST_IDX/t10k-images-idx3-ubyte.gz" --labels "$FMNIST_IDX/t10k-labels-idx1-ubyte.gz")
for fmt in hdf5 lmdb; do
  "${D[@]}" convert-idx "${IDX[@]}" --format $fmt --out "$T/idx.$fmt" > /dev/null || fail "convert-idx $fmt"
  expect_exit 2 "pass --overwrite" -- "${D[@]}" convert-idx "${IDX[@]}" --format $fmt --out "$T/idx.$fmt"
done
echo "ok: converters refuse to overwrite without --overwrite"
