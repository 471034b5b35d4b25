#!/usr/bin/env bash
# Fashion-MNIST, from the IDX files of Debian's dataset-fashion-mnist, to the HDF5 files that `make data` and
# `make run` use (`make data` runs this script):
#   data/prepare_fashion_mnist.sh [IDX_DIR [OUT_DIR]]
# IDX_DIR (default $FMNIST_IDX or /usr/share/datasets/fashion-mnist) holds {train,t10k}-{images-idx3,labels-idx1}
# -ubyte.gz; OUT_DIR (default data/fashion_mnist) gets train.h5 and test.h5, the test set with the training
# set's mean/std. Nothing is converted while both are newer than their inputs.
source "$(dirname "$0")/lib.bash"
(($# <= 2)) || die "usage: $PROG [IDX_DIR [OUT_DIR]]"
idx=${1:-${FMNIST_IDX:-/usr/share/datasets/fashion-mnist}}
out=${2:-$REPO/data/fashion_mnist}
names="T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"

inputs=()
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  need_file "$idx/$f" "install Debian's dataset-fashion-mnist (make deps) or give the folder holding the IDX files"
  inputs+=("$idx/$f")
done
need_converter
up_to_date "$out/train.h5" "$out/test.h5" -- "${inputs[@]}" && exit 0
mkdir -p "$out"
(
  set -x
  "$CONVERT" convert-idx --images "$idx/train-images-idx3-ubyte.gz" --labels "$idx/train-labels-idx1-ubyte.gz" \
    --out "$out/train.h5" --overwrite --class-names "$names"
  "$CONVERT" convert-idx --images "$idx/t10k-images-idx3-ubyte.gz" --labels "$idx/t10k-labels-idx1-ubyte.gz" \
    --out "$out/test.h5" --overwrite --stats-from "$out/train.h5" --class-names "$names"
)
