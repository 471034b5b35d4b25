#!/usr/bin/env bash
# Stochastic weight averaging (--train.swa_start_epoch, src/train/swa.h) on a 640-image Fashion-MNIST subset,
# 5 epochs of 20 steps, SWA from epoch 3: the average in the final checkpoint is the mean of the weights of the
# epoch-end checkpoints; the SWA epochs' learning rates are those of torch's SWALR stepped as its recipe steps it;
# bn1's recomputed running mean is the mean of conv1's output for the averaged weights over the training set
# (numpy); swa_test_* in the last eval event only, and in TensorBoard; resume bit-exact (np 2) and resharded
# (2 -> 1), a resume with nothing left reporting the same; np 1 and np 2 agree; export --weights swa; wrong
# options and SWA/non-SWA checkpoint mismatches refused; --device emu agrees with cpu.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
$PY - "$FMNIST_TRAIN" "$T/train.h5" 640 "$FMNIST_TEST" "$T/test.h5" 1000 <<'PY'
import h5py, sys
a = sys.argv[1:]
for src, dst, n in ((a[0], a[1], int(a[2])), (a[3], a[4], int(a[5]))):
    with h5py.File(src, "r") as s, h5py.File(dst, "w") as d:
        for k in ("images", "labels"):
            d.create_dataset(k, data=s[k][:n])
        for k, v in s.attrs.items():
            d.attrs[k] = v
PY
# Ghost batch norm over groups of 8: training and the recomputed statistics are the same on 1 or 2 ranks.
SWA=(--train.swa_start_epoch 2 --train.swa_lr 0.02 --train.swa_anneal_epochs 2)
COMMON=(--config jobs/fashion_mnist.ini --data.train "$T/train.h5" --data.test "$T/test.h5" --train.batch 32
        --bn.group_size 8 --train.epochs 5 --log.every_steps 10 --checkpoint.every_steps 10 --checkpoint.keep 20
        "${SWA[@]}")
run() {  # run NP RUN_DIR [extra...]
  local np=$1 dir=$2; shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "run $dir (np $np) failed"; }
}
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }
cmp_ckpt() { $PY tests/e2e/ckpt_compare.py "$@" || fail "checkpoints differ: $*"; }
# swa_fields METRICS: the last eval event's swa_test_acc swa_test_loss swa_test_top5 test_acc (only evaluations
# after the last step have them).
swa_fields() {
  $PY - "$1" <<'PY'
import json, sys
ev = [e for e in map(json.loads, filter(str.strip, open(sys.argv[1]))) if e["event"] == "eval"]
last = max(e["step"] for e in ev)
assert all(("swa_test_acc" in e) == (e["step"] == last) for e in ev), "swa_test_acc before the end of training"
print(*(repr(ev[-1][k]) for k in ("swa_test_acc", "swa_test_loss", "swa_test_top5", "test_acc")))
PY
}

run 2 "$T/ref"
read -r acc loss top5 raw_acc <<<"$(swa_fields "$T/ref/metrics.jsonl")"
$PY -c "import sys; sys.exit(0 if 0.5 < $acc <= $top5 <= 1 and 0 < $loss < 2 else 1)" ||
  fail "eval event: swa_test_acc $acc swa_test_loss $loss swa_test_top5 $top5"
echo "ok: last eval event swa_test_acc $acc swa_test_loss $loss swa_test_top5 $top5 (test_acc $raw_acc)"

# The average against the epoch-end checkpoints of epochs 3, 4 and 5, averaged here in double.
$PY - "$(ck "$T/ref" 60)" "$(ck "$T/ref" 80)" "$(ck "$T/ref" 100)" <<'PY' || fail "SWA average"
import h5py, numpy as np, sys
f = [h5py.File(p, "r") for p in sys.argv[1:]]
assert [(g.attrs["swa_models"], g.attrs["swa_bn_models"]) for g in f] == [(1, 0), (2, 0), (3, 3)], \
    [(g.attrs["swa_models"], g.attrs["swa_bn_models"]) for g in f]
for k in f[2]["params"]:
    want = np.mean([g["params"][k][()].astype(np.float64) for g in f], axis=0)
    got = f[2]["swa/params"][k][()]
    assert np.all(np.abs(got - want) <= 1e-6 + 1e-5 * np.abs(want)), (k, np.abs(got - want).max())
assert not np.array_equal(f[2]["swa/params/fc1.weight"][()], f[2]["params/fc1.weight"][()])
print("ok: /swa/params is the mean of the weights at the ends of epochs 3-5 (3 models)")
PY

# bn1 normalises conv1's output: its recomputed running mean is that output's mean over the 640 images (equal
# groups of 8, none dropped) for the averaged conv1 weights; the model's own running mean is another.
$PY - "$T/train.h5" "$(ck "$T/ref" 100)" <<'PY' || fail "recomputed batch-norm statistics"
import h5py, numpy as np, sys
d, c = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
x = (d["images"][()].astype(np.float64) - d.attrs["mean"]) / d.attrs["std"]    # [N,28,28,1]
xp = np.pad(x[..., 0], ((0, 0), (1, 1), (1, 1)))
w = c["swa/params/conv1.weight"][()].astype(np.float64)                       # [16,3,3,1], no bias
shifted = np.array([[xp[:, r:r + 28, s:s + 28].mean() for s in range(3)] for r in range(3)])
want = np.einsum("krs,rs->k", w[..., 0], shifted)
got = c["swa/buffers/bn1.running_mean"][()]
assert np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)
assert not np.allclose(c["buffers/bn1.running_mean"][()], want, rtol=1e-2, atol=1e-3)
print("ok: the recomputed bn1 running mean is conv1's mean output for the SWA weights over the training set")
PY

# SWALR: torch's own scheduler in the recipe (the main schedule stepped per epoch until epoch 2, then SWALR);
# the rate it sets for each SWA epoch is what every train event of that epoch reports.
$PY - "$T/ref/metrics.jsonl" <<'PY' || fail "SWA learning rates"
import json, sys, warnings
import torch
warnings.filterwarnings("ignore")  # the schedulers step without an optimizer step here
ev = [e for e in map(json.loads, filter(str.strip, open(sys.argv[1]))) if e["event"] == "train"]
lr_at = {e["step"]: e["lr"] for e in ev}                  # logged every 10 steps
lr0 = lr_at[50]                                           # SWA epoch 0 trains at the schedule's rate of its start
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.07)
main = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: lr0 / 0.07 if e >= 2 else 1.0)
swa = torch.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=2, anneal_strategy="cos")
for epoch in range(5):
    if epoch >= 2:
        for step in (epoch * 20 + 10, epoch * 20 + 20):
            want = opt.param_groups[0]["lr"]
            assert abs(lr_at[step] - want) <= 1e-9 * want, (epoch, step, lr_at[step], want)
    (swa if epoch >= 2 else main).step()
assert lr_at[100] == 0.02 and lr_at[70] < lr0, lr_at
print("ok: SWA epochs train at torch SWALR's rates:", [lr_at[s] for s in (50, 70, 90)])
PY

# TensorBoard holds what metrics.jsonl holds, swa_test_acc included.
TBPY=$(bash tests/obs/tb_venv.sh "$BUILD/tbvenv") || fail "the TensorBoard reader could not be installed"
grep -q '"swa_test_acc":' "$T/ref/metrics.jsonl" || fail "no swa_test_acc in metrics.jsonl"
"$TBPY" tests/obs/tb_check.py "$T/ref" || fail "TensorBoard does not show metrics.jsonl"

# Resume at the same rank count, after one model was averaged: bit for bit, the recomputed statistics included.
run 2 "$T/a" --train.stop_at_step 70
run 2 "$T/a" --resume auto
grep -q "resumed from $(ck "$T/a" 70)" "$T/a.log" || fail "did not resume from step 70"
cmp_ckpt "$(ck "$T/ref" 100)" "$(ck "$T/a" 100)" --buffers
[ "$(swa_fields "$T/a/metrics.jsonl")" = "$acc $loss $top5 $raw_acc" ] ||
  fail "resumed: $(swa_fields "$T/a/metrics.jsonl") != uninterrupted $acc $loss $top5 $raw_acc"
# Nothing left to train: the final checkpoint's statistics are evaluated as they are, not recomputed.
run 2 "$T/a" --resume auto
! grep -q "its batch-norm statistics recomputed over" "$T/a.log" ||
  fail "a resume with nothing left recomputed the statistics"
[ "$(swa_fields "$T/a/metrics.jsonl")" = "$acc $loss $top5 $raw_acc" ] || fail "nothing-left resume's eval differs"
echo "ok: SWA resume bit-exact (np 2) and with nothing left"

# Across rank counts the runs differ by the order of the gradient sums, which 100 steps at the recipe's rate
# amplify to a few percent in single weights: these runs train at a 14x smaller rate for 3 epochs (SWA from
# the second), so that what SWA adds is compared, not the chaos of training.
SMALL=(--train.lr 0.005 --train.swa_lr 0.002 --train.epochs 3 --train.swa_start_epoch 1)
# close_swa A B TOL: every /swa dataset of checkpoint A within TOL * max|B| of B's (the worst is printed).
close_swa() {
  $PY - "$@" <<'PY' || fail "SWA averages differ: $*"
import h5py, numpy as np, sys
a, b, tol = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), float(sys.argv[3])
names = []
b["swa"].visititems(lambda n, o: names.append("swa/" + n) if isinstance(o, h5py.Dataset) else None)
err = {n: float(np.abs(a[n][()] - b[n][()]).max() / np.abs(b[n][()]).max()) for n in names}
worst = max(err, key=err.get)
assert len(names) == 14 and err[worst] <= tol, (worst, err[worst])
print(f"ok: {len(names)} SWA datasets within {err[worst]:.2g} of the largest value ({worst})")
PY
}
# swa_close FIELDS_A FIELDS_B: swa_test_loss within 2e-4 (relative), accuracy and top-5 within 2 of 1000 images.
swa_close() {
  $PY -c "import sys; a, b = [[float(x) for x in s.split()] for s in sys.argv[1:]]
sys.exit(0 if abs(a[1] - b[1]) <= 2e-4 * b[1] and abs(a[0] - b[0]) <= 2e-3 and abs(a[2] - b[2]) <= 2e-3 else 1)" \
    "$1" "$2" || fail "swa_test_acc, _loss, _top5: $1 vs $2"
}
run 2 "$T/s2" "${SMALL[@]}"
run 1 "$T/s1" "${SMALL[@]}"
swa_close "$(swa_fields "$T/s1/metrics.jsonl")" "$(swa_fields "$T/s2/metrics.jsonl")"
close_swa "$(ck "$T/s1" 60)" "$(ck "$T/s2" 60)" 5e-3
echo "ok: np 1 and np 2 agree: $(swa_fields "$T/s1/metrics.jsonl") vs $(swa_fields "$T/s2/metrics.jsonl")"
# Resharded: written by 2 ranks after the first model, continued by 1.
run 2 "$T/b" "${SMALL[@]}" --train.stop_at_step 50
run 1 "$T/b" "${SMALL[@]}" --resume auto
grep -q "resumed from $(ck "$T/b" 50)" "$T/b.log" || fail "did not resume from step 50"
swa_close "$(swa_fields "$T/b/metrics.jsonl")" "$(swa_fields "$T/s2/metrics.jsonl")"
close_swa "$(ck "$T/b" 60)" "$(ck "$T/s2" 60)" 5e-3
echo "ok: SWA resume resharded (2 -> 1)"

# Export: the average with its statistics from the final checkpoint; refused before the end and without SWA.
"$BUILD/cnntrain-data" export "$(ck "$T/ref" 100)" --out "$T/swa.h5" --weights swa > /dev/null
$PY - "$(ck "$T/ref" 100)" "$T/swa.h5" <<'PY' || fail "exported weights are not the checkpoint's SWA average"
import h5py, numpy as np, sys
c, e = (h5py.File(p, "r") for p in sys.argv[1:])
assert e.attrs["weights"] == "swa"
assert np.array_equal(e["fc1/weight"][()], c["swa/params/fc1.weight"][()])
assert np.array_equal(e["bn2/running_var"][()], c["swa/buffers/bn2.running_var"][()])
PY
expect_exit 4 "was written before the end of training" -- \
  "$BUILD/cnntrain-data" export "$(ck "$T/ref" 80)" --out "$T/x.h5" --weights swa
run 1 "$T/plain" --train.swa_start_epoch 0 --train.max_steps 10
expect_exit 4 "without --train.swa_start_epoch; export it with --weights raw" -- \
  "$BUILD/cnntrain-data" export "$(ck "$T/plain" 10)" --out "$T/x.h5" --weights swa
expect_exit 4 "without --train.swa_start_epoch; continue it with --train.swa_start_epoch 0" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x" --resume "$(ck "$T/plain" 10)"
expect_exit 4 "with --train.swa_start_epoch; continue it with the same --train.swa_start_epoch" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --train.swa_start_epoch 0 --run-dir "$T/y" --resume "$(ck "$T/ref" 50)"
expect_exit 2 "needs --train.swa_lr" -- "$BUILD/cnntrain" "${COMMON[@]}" --train.swa_lr 0 --run-dir "$T/z"
expect_exit 2 "SWA would start at step 40, but the run ends after step 30" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --train.max_steps 30 --run-dir "$T/z"
echo "ok: export --weights swa, mismatches and impossible options refused"

# --device emu: the same SWA fields as cpu (64 training and 256 test images; the emulator is slow).
$PY - "$T/train.h5" "$T/train64.h5" "$T/test.h5" "$T/test256.h5" <<'PY'
import h5py, sys
for src, dst, n in ((sys.argv[1], sys.argv[2], 64), (sys.argv[3], sys.argv[4], 256)):
    with h5py.File(src, "r") as s, h5py.File(dst, "w") as d:
        for k in ("images", "labels"):
            d.create_dataset(k, data=s[k][:n])
        for k, v in s.attrs.items():
            d.attrs[k] = v
PY
for dev in cpu emu; do
  run 1 "$T/$dev" --device $dev --data.train "$T/train64.h5" --data.test "$T/test256.h5" --train.batch 16 \
    --train.epochs 3 --train.swa_start_epoch 1 --checkpoint.at_end false --checkpoint.every_steps 0
done
read -r c_acc c_loss c_top5 _ <<<"$(swa_fields "$T/cpu/metrics.jsonl")"
read -r e_acc e_loss e_top5 _ <<<"$(swa_fields "$T/emu/metrics.jsonl")"
$PY -c "import sys; sys.exit(0 if abs($c_acc - $e_acc) <= 1/256 and abs($c_top5 - $e_top5) <= 1/256 and
abs($c_loss - $e_loss) <= 1e-3 * $c_loss else 1)" ||
  fail "emu vs cpu: swa_test_acc $e_acc vs $c_acc, swa_test_loss $e_loss vs $c_loss, swa_test_top5 $e_top5 vs $c_top5"
echo "ok: --device emu: swa_test_acc $e_acc, swa_test_loss $e_loss (cpu $c_acc, $c_loss)"
