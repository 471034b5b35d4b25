#!/usr/bin/env bash
# The 16-bit gradient allreduce (--comm.grad_dtype, docs/mixed_precision.md) trains as well as fp32: the
# `make run` training (jobs/fashion_mnist.ini: fmnist_cnn, global batch 128, mpirun -np 2; 3 of its 6 epochs)
# with the gradient summed in bf16 and in fp16 reaches a final test accuracy within 0.5 points of the fp32 sum's, and
# the log says what travels. Then the NCCL code path under the emulator (mpirun -np 2 --device emu) with a
# bf16 sum: finite losses, the same log line, the gradient staged through the device.
source "$(dirname "$0")/lib.bash"
acc_of() {  # acc_of WIRE: trains, prints the final test accuracy
  local run="$E2E_TMP/$1"
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.epochs 3 --comm.grad_dtype "$1" \
    --log.every_steps 500 --log.tensorboard false --checkpoint.at_end false --run-dir "$run" > "$run.log" 2>&1 ||
    fail "--comm.grad_dtype $1 failed:\n$(tail -20 "$run.log")"
  [ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "$1: the run did not complete"
  grep -q "summed in $1" "$run/log.txt" || fail "$1: the log does not say the gradient is summed in $1"
  json_field "$run/metrics.jsonl" end final_test_acc
}
fp32=$(acc_of fp32)
for wire in bf16 fp16; do
  acc=$(acc_of $wire)
  $PY -c "import sys; sys.exit(0 if abs(float('$acc') - float('$fp32')) <= 0.005 else 1)" ||
    fail "gradient summed in $wire: test accuracy $acc is more than 0.5 points from fp32's $fp32"
  echo "ok: Fashion-MNIST np 2, gradient summed in $wire: test accuracy $acc vs fp32 $fp32 (within 0.5 points)"
done

emu_run() {  # emu_run WIRE: 6 steps at np 2 under the emulator (NCCL code path)
  local run="$E2E_TMP/emu-$1"
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" --device emu --model fmnist_cnn --data.synthetic 64x28x28x1:10 --data.test "" \
    --train.batch 16 --train.max_steps 6 --train.lr 0.01 --log.every_steps 1 --comm.grad_dtype "$1" \
    --comm.bucket_mb 0.05 --checkpoint.at_end false --log.tensorboard false --run-dir "$run" > "$run.log" 2>&1 ||
    fail "emu np 2 with --comm.grad_dtype $1 failed:\n$(tail -20 "$run.log")"
  grep -q "emulated NCCL.*summed in $1" "$run/log.txt" || fail "emu: the log does not name the NCCL path with $1"
}
emu_run fp32
emu_run bf16
# The first step's loss precedes any update: equal. Later ones follow from gradients summed in bf16: different,
# and within 2% of the fp32 sum's.
$PY - "$E2E_TMP/emu-bf16/metrics.jsonl" "$E2E_TMP/emu-fp32/metrics.jsonl" <<'PY' || fail "emu np 2 bf16 sum: bad losses"
import json, math, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 6 and all(math.isfinite(l) for l in a), (a, b)
assert a[0] == b[0], f"first losses differ: {a[0]} vs {b[0]}"
assert a != b, "the bf16 sum changed no loss: was the gradient rounded at all?"
err = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert err <= 0.02, f"bf16 sum losses {a} vs fp32 {b}: {err:.1e} relative > 0.02"
print(f"ok: emu np 2, gradient summed in bf16 through the NCCL path: losses within {err:.1e} of the fp32 sum's")
PY
