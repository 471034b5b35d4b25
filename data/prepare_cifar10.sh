#!/usr/bin/env bash
# CIFAR-10, from its binary version (cifar-10-binary.tar.gz, unpacked: cifar-10-batches-bin/), to the HDF5 files
# that jobs/cifar10_resnet20.ini trains on:
#   data/prepare_cifar10.sh BATCHES_DIR [OUT_DIR]
# BATCHES_DIR holds data_batch_1.bin ... data_batch_5.bin, test_batch.bin and batches.meta.txt (the class
# names); OUT_DIR (default data/cifar10) gets train.h5 (50000 images) and test.h5 (10000, with the training
# set's mean/std). FORMAT=lmdb also writes train.lmdb and test.lmdb (raw Caffe Datums) from them. Nothing is
# converted while the outputs are newer than their inputs.
source "$(dirname "$0")/lib.bash"
(($# >= 1 && $# <= 2)) || die "usage: $PROG BATCHES_DIR [OUT_DIR]   (BATCHES_DIR: the unpacked cifar-10-batches-bin)"
src=$1
out=${2:-$REPO/data/cifar10}
format=${FORMAT:-hdf5}
[[ $format == hdf5 || $format == lmdb ]] || die "FORMAT must be hdf5 or lmdb, not '$format'"

hint="unpack cifar-10-binary.tar.gz (the binary version) and give its cifar-10-batches-bin folder"
train=()
for b in 1 2 3 4 5; do
  need_file "$src/data_batch_$b.bin" "$hint"
  train+=("$src/data_batch_$b.bin")
done
need_file "$src/test_batch.bin" "$hint"
need_file "$src/batches.meta.txt" "$hint"
mapfile -t names < <(grep -v '^[[:space:]]*$' "$src/batches.meta.txt")
((${#names[@]} == 10)) || die "$src/batches.meta.txt names ${#names[@]} classes, not CIFAR-10's 10"
need_converter

outputs=("$out/train.h5" "$out/test.h5")
[[ $format == hdf5 ]] || outputs+=("$out/train.lmdb" "$out/test.lmdb")
up_to_date "${outputs[@]}" -- "${train[@]}" "$src/test_batch.bin" "$src/batches.meta.txt" && exit 0
mkdir -p "$out"
class_names=$(IFS=,; echo "${names[*]}")
(
  set -x
  "$CONVERT" convert-cifar --input "$(IFS=,; echo "${train[*]}")" --out "$out/train.h5" --overwrite \
    --class-names "$class_names"
  "$CONVERT" convert-cifar --input "$src/test_batch.bin" --out "$out/test.h5" --overwrite \
    --stats-from "$out/train.h5" --class-names "$class_names"
)
[[ $format == hdf5 ]] && exit 0
for split in train test; do
  rm -rf "$out/$split.lmdb.part"
  (set -x; "$CONVERT" convert-hdf5-lmdb --in "$out/$split.h5" --out "$out/$split.lmdb.part")
  commit "$out/$split.lmdb.part" "$out/$split.lmdb"
done
