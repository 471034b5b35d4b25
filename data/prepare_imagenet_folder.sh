#!/usr/bin/env bash
# An ImageNet-style folder tree to a training and a validation set with one class list:
#   data/prepare_imagenet_folder.sh SRC [OUT_DIR]
# SRC/train/<class>/*.JPEG (or .jpg, .png) gives the classes, in sorted (byte) order as convert-folder numbers
# them. SRC/val/ either has the same <class>/ folders or is flat, with the labels in VAL_LABELS (default
# SRC/LOC_val_solution.csv): ILSVRC's CSV (ImageId,PredictionString; the first word of the prediction is the
# class) or "FILE LABEL" lines, LABEL a class folder name or its index (Caffe's val.txt). Every val image needs
# one label and every label a training class. The val set is converted from a tree of symbolic links with a
# folder for every training class, so its labels are the training set's even where val lacks a class.
# OUT_DIR (default data/imagenet) gets train.lmdb and val.lmdb: the image files as they are (Caffe's
# convert_imageset --encoded), decoded and resized at training time (--data.image_size). SIZE=HxW stores decoded
# pixels of that size instead; FORMAT=hdf5 (needs SIZE) writes train.h5 and val.h5, holding a whole split in
# memory while writing. ON_BAD_IMAGE=skip skips unreadable files. The val set gets the training set's mean/std
# where that stores them (SIZE given). The training set is converted again when SRC/train, the settings, the
# converter or this script change; the val set also when SRC/val, the labels or the training set change.
source "$(dirname "$0")/lib.bash"
(($# >= 1 && $# <= 2)) || die "usage: $PROG SRC [OUT_DIR]   (SRC: train/<class>/*.JPEG and val/; data/README.md)"
src=${1%/}
out=${2:-$REPO/data/imagenet}
format=${FORMAT:-lmdb} size=${SIZE:-} on_bad=${ON_BAD_IMAGE:-fail}
case $format in
  lmdb) ext=lmdb ;;
  hdf5) ext=h5; [[ -n $size ]] || die "FORMAT=hdf5 needs SIZE=HxW: an HDF5 set holds one image size" ;;
  *) die "FORMAT must be lmdb or hdf5, not '$format'" ;;
esac
[[ -z $size || $size =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "SIZE must be HxW, e.g. 256x256, not '$size'"
[[ $on_bad == fail || $on_bad == skip ]] || die "ON_BAD_IMAGE must be fail or skip, not '$on_bad'"
for d in train val; do
  [[ -d $src/$d ]] || die "$src/$d not found; SRC must hold train/<class>/*.JPEG and val/ (see data/README.md)"
done
need_converter
PYTHON=${CNNTRAIN_PYTHON:-/usr/bin/python3}  # h5py, for FORMAT=hdf5 (make deps installs python3-h5py)

mapfile -t classes < <(find -H "$src/train" -mindepth 1 -maxdepth 1 -xtype d -printf '%f\n' | LC_ALL=C sort)
((${#classes[@]} > 0)) || die "$src/train has no class folders; expected train/<class>/*.JPEG"
mapfile -t val_dirs < <(find -H "$src/val" -mindepth 1 -maxdepth 1 -xtype d -printf '%f\n' | LC_ALL=C sort)
labels=
if ((${#val_dirs[@]} == 0)); then
  labels=${VAL_LABELS:-$src/LOC_val_solution.csv}
  hint="a flat $src/val needs its labels: ILSVRC's LOC_val_solution.csv or \"FILE LABEL\" lines (VAL_LABELS=FILE)"
  need_file "$labels" "$hint"
fi

mkdir -p "$out"
# The settings are an input of both outputs: another FORMAT, SIZE or ON_BAD_IMAGE converts again.
settings="format=$format size=$size on_bad_image=$on_bad"
[[ -f $out/.settings && $(<"$out/.settings") == "$settings" ]] || echo "$settings" >"$out/.settings"
args=(--format "$format" --on-bad-image "$on_bad" --overwrite)
[[ -z $size ]] || args+=(--raw --size "$size")
train_out=$out/train.$ext val_out=$out/val.$ext

# The val labels are checked before anything is converted: a wrong label should not cost a training set's
# conversion first.
train_stale=0
up_to_date "$train_out" -- "$src/train" "$out/.settings" || train_stale=1
if ((!train_stale)) && up_to_date "$val_out" -- "$src/val" ${labels:+"$labels"} "$train_out"; then exit 0; fi

# A scratch folder (removed at exit) holds val_by_class/: a folder for every training class, with links to the
# val images of that class.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/prepare_imagenet.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tree=$scratch/val_by_class
for c in "${classes[@]}"; do mkdir -p "$tree/$c"; done
val_abs=$(cd "$src/val" && pwd)
if [[ -z $labels ]]; then
  for c in "${val_dirs[@]}"; do
    [[ -d $tree/$c ]] || die "$src/val/$c is not a class of $src/train; the val set can only hold training classes"
    rmdir "$tree/$c"
    ln -s "$val_abs/$c" "$tree/$c"
  done
else
  # One line "CLASS<tab>FILE" per val image, checked against the val folder and the classes (awk: one pass).
  find -H "$src/val" -mindepth 1 -maxdepth 1 -xtype f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) \
    -printf '%f\n' >"$scratch/val_files"
  [[ -s $scratch/val_files ]] || die "$src/val holds neither images (*.JPEG, *.jpg, *.png) nor class folders"
  printf '%s\n' "${classes[@]}" >"$scratch/classes"
  awk -v labels="$labels" -v val="$src/val" -f "$DATA_DIR/val_labels.awk" "$scratch/classes" "$scratch/val_files" \
    "$labels" | LC_ALL=C sort >"$scratch/val_labels"
  # One ln per class (ln -t takes many files), not one per image: ILSVRC's val set has 50000.
  prev='' batch=()
  link_batch() { ((${#batch[@]} == 0)) || ln -s -t "$tree/$prev" -- "${batch[@]}"; batch=(); }
  while IFS=$'\t' read -r c f; do
    [[ $c == "$prev" ]] || { link_batch; prev=$c; }
    batch+=("$val_abs/$f")
  done <"$scratch/val_labels"
  link_batch
fi

if ((train_stale)); then
  rm -rf "$train_out.part"
  (set -x; "$CONVERT" convert-folder "$src/train" --out "$train_out.part" "${args[@]}")
  commit "$train_out.part" "$train_out"
fi
rm -rf "$val_out.part"
(set -x; "$CONVERT" convert-folder "$tree" --out "$val_out.part" "${args[@]}")
# The val set is normalised like the training set: its mean/std, where the training set stores them (decoded
# pixels; an encoded LMDB stores none and the reader estimates them at open).
if [[ $format == lmdb ]]; then
  meta=cnntrain_meta.txt
  if grep -q '^mean ' "$train_out/$meta"; then
    grep -v '^mean \|^std ' "$val_out.part/$meta" >"$val_out.part/$meta.new"
    grep '^mean \|^std ' "$train_out/$meta" >>"$val_out.part/$meta.new"
    mv "$val_out.part/$meta.new" "$val_out.part/$meta"
  fi
else
  hint="install python3-h5py (make deps) or set CNNTRAIN_PYTHON"
  "$PYTHON" - "$train_out" "$val_out.part" <<'PY' || die "could not copy the training set's mean/std with $PYTHON: $hint"
import sys, h5py
with h5py.File(sys.argv[1], "r") as train, h5py.File(sys.argv[2], "r+") as val:
    for name in ("mean", "std"):
        val.attrs[name] = train.attrs[name]
PY
fi
commit "$val_out.part" "$val_out"
echo "$PROG: $train_out and $val_out ready (${#classes[@]} classes)"
