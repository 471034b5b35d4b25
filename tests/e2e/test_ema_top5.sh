#!/usr/bin/env bash
# The weights' moving average (--train.ema) and top-5 in the eval events: ema_test_acc/ema_test_loss and
# test_top5 present and sane; the average in checkpoints with resume bit-exact (same rank count, through the
# warm-up's position) and resharded (2 -> 1) within float tolerance; np 1 and np 2 agree; export
# --weights ema|raw; EMA/non-EMA checkpoint mismatches refused; a step skipped for a NaN gradient is no update;
# --device emu agrees with cpu.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
# Batch norm over fixed groups of 8 samples: the same computation on 1 or 2 ranks (global batch 32).
COMMON=(--config jobs/fashion_mnist.ini --train.batch 32 --bn.group_size 8 --log.every_steps 1000
        --train.max_steps 24 --train.ema 0.9 --train.ema_warmup true)
run() {  # run NP RUN_DIR [extra...]
  local np=$1 dir=$2; shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "run $dir (np $np) failed"; }
}
ck() { echo "$1/checkpoints/ckpt-$(printf %010d "$2").h5"; }
cmp_ckpt() { $PY tests/e2e/ckpt_compare.py "$@" || fail "checkpoints differ: $*"; }
# eval_fields METRICS: the last eval event's test_acc test_top5 ema_test_acc ema_test_loss test_loss.
eval_fields() {
  $PY - "$1" <<'PY'
import json, sys
e = [e for e in map(json.loads, filter(str.strip, open(sys.argv[1]))) if e["event"] == "eval"][-1]
print(*(repr(e[k]) for k in ("test_acc", "test_top5", "ema_test_acc", "ema_test_loss", "test_loss")))
PY
}

# A checkpoint at step 12 as the resumed runs have: a checkpoint averages the batch-norm statistics over the
# ranks and goes on from that average.
run 2 "$T/ref2" --checkpoint.every_steps 12
read -r acc top5 eacc eloss loss <<<"$(eval_fields "$T/ref2/metrics.jsonl")"
$PY -c "import sys; a, t, e, l = $acc, $top5, $eacc, $eloss
# Top-5 holds every top-1 hit; 24 steps from scratch leave both models far from perfect but well above chance.
sys.exit(0 if 0.1 < a <= t <= 1 and 0.1 < e < 1 and 0 < l < 3 and e != a else 1)" ||
  fail "eval event: test_acc $acc test_top5 $top5 ema_test_acc $eacc ema_test_loss $eloss"
echo "ok: eval event test_acc $acc test_top5 $top5 ema_test_acc $eacc ema_test_loss $eloss"

# np 1 and np 2: the same global batches; the gradient sums differ only in their order. LeNet-5 has no batch
# norm, whose running statistics (kept per rank, averaged for evaluation) depend on the rank count.
run 1 "$T/le1" --model lenet5
run 2 "$T/le2" --model lenet5
read -r _ top51 eacc1 eloss1 _ <<<"$(eval_fields "$T/le1/metrics.jsonl")"
read -r _ top52 eacc2 eloss2 _ <<<"$(eval_fields "$T/le2/metrics.jsonl")"
$PY -c "import sys; sys.exit(0 if abs($eacc1 - $eacc2) <= 2e-4 and abs($eloss1 - $eloss2) <= 1e-5 * $eloss2 and
abs($top51 - $top52) <= 2e-4 else 1)" ||
  fail "np 1 vs np 2: ema_test_acc $eacc1 vs $eacc2, ema_test_loss $eloss1 vs $eloss2, test_top5 $top51 vs $top52"
cmp_ckpt "$(ck "$T/le1" 24)" "$(ck "$T/le2" 24)" --rtol 1e-3
echo "ok: np 1 and np 2 agree (ema_test_acc $eacc1 vs $eacc2, ema_test_loss $eloss1 vs $eloss2)"

# Resume at the same rank count: bit for bit, the average and its warm-up position included.
run 2 "$T/a" --train.stop_at_step 12
run 2 "$T/a" --resume auto
grep -q "resumed from $(ck "$T/a" 12)" "$T/a.log" || fail "did not resume from step 12"
$PY -c "import h5py; assert h5py.File('$(ck "$T/a" 12)')['ema/conv1.weight'].shape == (16, 3, 3, 1)" ||
  fail "the checkpoint has no ema/conv1.weight"
cmp_ckpt "$(ck "$T/ref2" 24)" "$(ck "$T/a" 24)" --buffers
[ "$(eval_fields "$T/a/metrics.jsonl")" = "$acc $top5 $eacc $eloss $loss" ] ||
  fail "resumed eval $(eval_fields "$T/a/metrics.jsonl") != uninterrupted $acc $top5 $eacc $eloss $loss"
# Resharded: written by 2 ranks, continued by 1.
run 2 "$T/b" --train.stop_at_step 12
run 1 "$T/b" --resume auto
cmp_ckpt "$(ck "$T/ref2" 24)" "$(ck "$T/b" 24)" --rtol 1e-4
echo "ok: EMA resume bit-exact (np 2) and resharded (2 -> 1)"

# Export: the average or the weights, as asked.
"$BUILD/cnntrain-data" export "$(ck "$T/ref2" 24)" --out "$T/ema.h5" --weights ema > /dev/null
"$BUILD/cnntrain-data" export "$(ck "$T/ref2" 24)" --out "$T/raw.h5" > /dev/null
$PY - "$(ck "$T/ref2" 24)" "$T/ema.h5" "$T/raw.h5" <<'PY' || fail "exported weights are not the checkpoint's"
import h5py, numpy as np, sys
c, e, r = (h5py.File(p, "r") for p in sys.argv[1:])
assert e.attrs["weights"] == "ema" and r.attrs["weights"] == "raw"
assert np.array_equal(e["fc1/weight"][()], c["ema/fc1.weight"][()])
assert np.array_equal(r["fc1/weight"][()], c["params/fc1.weight"][()])
assert not np.array_equal(e["fc1/weight"][()], r["fc1/weight"][()])
# The running statistics are averaged beside the weights: the EMA export carries the averaged ones.
assert np.array_equal(e["bn1/running_mean"][()], c["ema/bn1.running_mean"][()])
assert np.array_equal(r["bn1/running_mean"][()], c["buffers/bn1.running_mean"][()])
assert not np.array_equal(e["bn1/running_var"][()], r["bn1/running_var"][()])
PY
run 1 "$T/plain" --train.ema 0 --train.max_steps 4
expect_exit 4 "without --train.ema; export it with --weights raw" -- \
  "$BUILD/cnntrain-data" export "$(ck "$T/plain" 4)" --out "$T/x.h5" --weights ema
expect_exit 2 "--weights must be raw, ema or swa" -- \
  "$BUILD/cnntrain-data" export "$(ck "$T/plain" 4)" --out "$T/x.h5" --weights best
expect_exit 4 "without --train.ema; continue it with --train.ema 0" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/x" --resume "$(ck "$T/plain" 4)"
expect_exit 4 "with --train.ema; continue it with the same --train.ema" -- \
  "$BUILD/cnntrain" "${COMMON[@]}" --train.ema 0 --run-dir "$T/y" --resume "$(ck "$T/ref2" 12)"
echo "ok: export --weights ema|raw, mismatches refused"

# A step skipped for a non-finite gradient (the test hook puts a NaN into rank 0's fc1.weight gradient at step
# 5) is no update: 7 updates folded in over 8 steps, and the average stays finite.
CNNTRAIN_TEST_NAN=0:fc1.weight:4 "$BUILD/cnntrain" "${COMMON[@]}" --data.test "" --train.max_steps 8 \
  --train.on_nonfinite skip --run-dir "$T/nan" > "$T/nan.log" 2>&1 || { cat "$T/nan.log"; fail "skip run failed"; }
$PY - "$(ck "$T/nan" 8)" <<'PY' || fail "the skipped step reached the moving average"
import h5py, numpy as np, sys
f = h5py.File(sys.argv[1], "r")
assert f.attrs["ema_updates"] == 7, f.attrs["ema_updates"]
assert all(np.isfinite(f["ema"][k][()]).all() for k in f["ema"])
PY
echo "ok: a skipped step is no EMA update (7 in 8 steps)"

# --device emu: the same eval fields as cpu on 256 test images (the emulator is slow).
$PY - data/fashion_mnist/test.h5 "$T/small.h5" <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r") as s, h5py.File(sys.argv[2], "w") as d:
    for k in ("images", "labels"):
        d.create_dataset(k, data=s[k][:256])
    for k, v in s.attrs.items():
        d.attrs[k] = v
PY
for dev in cpu emu; do
  run 1 "$T/$dev" --device $dev --data.test "$T/small.h5" --train.max_steps 6 --checkpoint.at_end false
done
read -r c_acc c_top5 c_eacc c_eloss c_loss <<<"$(eval_fields "$T/cpu/metrics.jsonl")"
read -r e_acc e_top5 e_eacc e_eloss e_loss <<<"$(eval_fields "$T/emu/metrics.jsonl")"
$PY -c "import sys; sys.exit(0 if abs($c_top5 - $e_top5) <= 1/256 and abs($c_eacc - $e_eacc) <= 1/256 and
abs($c_eloss - $e_eloss) <= 1e-3 * $c_eloss else 1)" ||
  fail "emu vs cpu: test_top5 $e_top5 vs $c_top5, ema_test_acc $e_eacc vs $c_eacc, ema_test_loss $e_eloss vs $c_eloss"
echo "ok: --device emu: test_top5 $e_top5, ema_test_acc $e_eacc (cpu $c_top5, $c_eacc)"
