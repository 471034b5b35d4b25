#!/usr/bin/env bash
# Checkpoints: bit-exact resume at the same rank count, resharding (4->2, 2->4, 4->1), keep-last-K,
# permissions, export, and corrupt/mismatched checkpoints (exit 4 for --resume PATH, fallback for auto).
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
# Batch norm over fixed groups of 8 samples: the same computation on 1, 2 or 4 ranks (global batch 32).
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --bn.group_size 8 --log.every_steps 1000)
run() {  # run NP RUN_DIR STEPS [extra...]
  local np=$1 dir=$2 steps=$3; shift 3
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" --train.max_steps "$steps" "$@" \
    > "$dir.log" 2>&1 || { cat "$dir.log"; fail "run $dir (np $np) failed"; }
}
cmp_ckpt() { $PY tests/e2e/ckpt_compare.py "$@" || fail "checkpoints differ: $*"; }
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }

# Uninterrupted references.
run 2 "$T/ref2" 24 --checkpoint.every_steps 6 --checkpoint.keep 2
run 4 "$T/ref4" 24
# Same rank count: 12 steps, stop, resume, 12 more == 24 straight, bit for bit (params and momentum).
run 2 "$T/a" 12 --checkpoint.every_steps 6
run 2 "$T/a" 24 --resume auto --checkpoint.every_steps 6
grep -q "resumed from $T/a/checkpoints/ckpt-0000000012.h5" "$T/a.log" || fail "did not resume from step 12"
cmp_ckpt "$(ck "$T/ref2" 24)" "$(ck "$T/a" 24)" --buffers
# AdamW: its moments and bias-correction step count continue exactly too.
run 2 "$T/adam_ref" 24 --train.optimizer adamw --train.lr 0.001
run 2 "$T/adam" 12 --train.optimizer adamw --train.lr 0.001
run 2 "$T/adam" 24 --train.optimizer adamw --train.lr 0.001 --resume auto
cmp_ckpt "$(ck "$T/adam_ref" 24)" "$(ck "$T/adam" 24)"
# Resharding: the same global batch sequence on another rank count; weights within float tolerance.
run 4 "$T/b" 12
run 2 "$T/b" 24 --resume auto
cmp_ckpt "$(ck "$T/ref4" 24)" "$(ck "$T/b" 24)" --rtol 1e-4
run 2 "$T/c" 12
run 4 "$T/c" 24 --resume "$(ck "$T/c" 12)"
cmp_ckpt "$(ck "$T/ref2" 24)" "$(ck "$T/c" 24)" --rtol 1e-4
run 4 "$T/d" 12
run 1 "$T/d" 24 --resume auto
cmp_ckpt "$(ck "$T/ref4" 24)" "$(ck "$T/d" 24)" --rtol 1e-4
echo "ok: bit-exact resume (SGD, AdamW) and resharding 4->2, 2->4, 4->1 (parameters and momentum)"

# keep-last-K and permissions.
n=$(ls "$T/ref2/checkpoints" | wc -l)
[ "$n" = 2 ] || fail "keep=2 left $n checkpoints: $(ls "$T/ref2/checkpoints")"
[ -e "$(ck "$T/ref2" 24)" ] && [ -e "$(ck "$T/ref2" 18)" ] || fail "keep=2 did not keep the newest two"
[ "$(stat -c %a "$(ck "$T/ref2" 24)")" = 600 ] || fail "checkpoint mode is not 0600"
[ "$(stat -c %a "$T/ref2/checkpoints")" = 700 ] || fail "checkpoint directory mode is not 0700"
[ "$(stat -c %a "$T/ref2")" = 700 ] || fail "run directory mode is not 0700"
echo "ok: keep-last-K, permissions"

# Export: weights-only file readable by h5py with the documented names.
"$BUILD/cnntrain-data" export "$(ck "$T/ref2" 24)" --out "$T/w.h5" > "$T/export.txt"
$PY -c "import h5py,sys; f=h5py.File('$T/w.h5'); assert f['conv1/weight'].shape==(16,3,3,1); assert f.attrs['model']=='fmnist_cnn'" \
  || fail "exported weights lack conv1/weight [16,3,3,1]"
# The summary counts parameters as training does (the batch-norm statistics apart).
grep -qF "14 tensors, 206970 parameters and 96 buffer values (model fmnist_cnn, step 24)" "$T/export.txt" ||
  fail "export summary: $(cat "$T/export.txt")"
expect_exit 2 "pass --overwrite" -- "$BUILD/cnntrain-data" export "$(ck "$T/ref2" 24)" --out "$T/w.h5"
echo "ok: export"

# Corruption. The good checkpoint at step 12 of run e, broken copies placed as newer checkpoints.
run 2 "$T/e" 12
good=$(ck "$T/e" 12)
cp "$good" "$T/flip.h5"
$PY - "$T/flip.h5" <<'PY'
import h5py, sys
p = sys.argv[1]
with h5py.File(p, "r") as f:
    off = f["params/fc1.weight"].id.get_offset()
with open(p, "r+b") as f:
    f.seek(off + 1000); b = f.read(1); f.seek(off + 1000); f.write(bytes([b[0] ^ 0xFF]))
PY
head -c 100000 "$good" > "$T/trunc.h5"
expect_exit 4 "checksum mismatch in dataset 'params/fc1.weight'" -- \
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x1" --train.max_steps 24 --resume "$T/flip.h5"
expect_exit 4 "trunc.h5" -- \
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x2" --train.max_steps 24 --resume "$T/trunc.h5"
expect_exit 4 "does not exist" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x3" --train.max_steps 24 --resume "$T/none.h5"
expect_exit 4 "dataset 'params/conv1.weight' has shape [16,3,3,1] but the model's is [6,5,5,1]" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --model lenet5 --run-dir "$T/x4" --train.max_steps 24 --resume "$good"
cp "$good" "$T/v2.h5"
$PY -c "import h5py; f=h5py.File('$T/v2.h5','r+'); f.attrs['format_version']=99"
expect_exit 4 "format version 99" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x5" --train.max_steps 24 --resume "$T/v2.h5"
expect_exit 4 "global batch 32" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --train.batch 64 --run-dir "$T/x6" --train.max_steps 24 --resume "$good"
# auto: newer broken checkpoints are skipped with a warning; the good one is used.
cp "$T/flip.h5" "$(ck "$T/e" 14)"
cp "$T/trunc.h5" "$(ck "$T/e" 16)"
touch "$T/e/checkpoints/ckpt-0000000018.h5.tmp"
run 2 "$T/e" 24 --resume auto
grep -q "removed 1 unfinished checkpoint" "$T/e.log" || fail "stale .tmp not removed"
grep -q "skipping checkpoint: cannot open checkpoint '$(ck "$T/e" 16)'" "$T/e.log" || fail "truncated checkpoint not skipped"
grep -q "skipping checkpoint: .*checksum mismatch" "$T/e.log" || fail "corrupt checkpoint not skipped"
grep -q "resumed from $good" "$T/e.log" || fail "auto did not fall back to the good checkpoint"
cmp_ckpt "$(ck "$T/ref2" 24)" "$(ck "$T/e" 24)"
echo "ok: corruption cases"
