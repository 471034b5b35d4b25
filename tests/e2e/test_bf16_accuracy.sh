#!/usr/bin/env bash
# bf16 trains as well as fp32: the `make run` training (jobs/fashion_mnist.ini: fmnist_cnn, global batch 128,
# mpirun -np 2; 3 of its 6 epochs) in --precision bf16 reaches a final test accuracy within 0.5 points of the
# fp32 run's.
# bf16 on the CPU needs AVX512-BF16 or AMX; on a CPU without them the trainer must refuse it with exit code 2
# naming the instruction set, and that refusal is what this script then checks instead.
source "$(dirname "$0")/lib.bash"
acc_of() {  # acc_of PRECISION: trains, prints the final test accuracy
  local run="$E2E_TMP/$1"
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.epochs 3 --precision "$1" \
    --log.every_steps 500 --log.tensorboard false --checkpoint.at_end false --run-dir "$run" > "$run.log" 2>&1 ||
    fail "--precision $1 failed:\n$(tail -20 "$run.log")"
  [ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "$1: the run did not complete"
  json_field "$run/metrics.jsonl" end final_test_acc
}
if ! grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo; then
  rc=0
  "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --precision bf16 --train.max_steps 1 --run-dir "$E2E_TMP/x" \
    > "$E2E_TMP/x.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -q 'AVX512' "$E2E_TMP/x.log" ||
    fail "without AVX512-BF16 --precision bf16 must exit 2 naming the instruction set (exit $rc)"
  echo "ok: this CPU has no AVX512-BF16/AMX: --precision bf16 refused with exit 2 (the accuracy check needs one)"
  exit 0
fi
fp32=$(acc_of fp32)
bf16=$(acc_of bf16)
$PY -c "import sys; sys.exit(0 if abs(float('$bf16') - float('$fp32')) <= 0.005 else 1)" ||
  fail "bf16 test accuracy $bf16 is more than 0.5 points from fp32's $fp32"
echo "ok: Fashion-MNIST test accuracy bf16 $bf16 vs fp32 $fp32 (within 0.5 points)"
