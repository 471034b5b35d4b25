#!/usr/bin/env bash
# --precision bf16/fp16 trains a ResNet (batch norm fused with its ReLU and with the residual join, ReLU fused
# into max pooling where the model has it) on the CPU and under the emulator (the CUDA kernels templated on the
# storage type): every step's loss is finite and the first one (same initial weights and batch) is within the
# type's rounding of the fp32 run's; fp16 reports its loss scale. Synchronised batch norm with 16-bit
# activations is refused with exit code 2 naming both options (docs/mixed_precision.md).
source "$(dirname "$0")/lib.bash"
args=(--model fmnist_resnet --data.synthetic 64x28x28x1:10 --data.test "" --train.max_steps 4 --train.batch 8
      --log.every_steps 1 --checkpoint.at_end false)

check() {  # check RUN REF RTOL: finite losses, the first within RTOL of REF's first
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'PY'
import json, math, sys
def train(p):
    return [e for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
a, b, rtol = train(sys.argv[1]), train(sys.argv[2]), float(sys.argv[3])
assert len(a) == len(b) == 4, f"expected 4 train events, got {len(a)} and {len(b)}"
assert all(math.isfinite(e["loss"]) for e in a), f"non-finite loss: {[e['loss'] for e in a]}"
err = abs(a[0]["loss"] - b[0]["loss"]) / abs(b[0]["loss"])
assert err <= rtol, f"first loss {a[0]['loss']} vs fp32 {b[0]['loss']}: {err:.2e} relative > {rtol}"
print(f"ok: losses {[round(e['loss'], 4) for e in a]}, first within {err:.1e} of fp32")
PY
}

for dev in cpu emu; do
  "$BUILD/cnntrain" "${args[@]}" --device $dev --run-dir "$E2E_TMP/$dev-fp32" > /dev/null || fail "$dev fp32 run"
  # bf16 on a CPU needs AVX512-BF16 (else exit 2, tested below); fp16 runs on every CPU.
  precisions="fp16"
  if [ $dev = emu ] || grep -qw avx512_bf16 /proc/cpuinfo; then precisions="bf16 fp16"; fi
  for p in $precisions; do
    run="$E2E_TMP/$dev-$p"
    "$BUILD/cnntrain" "${args[@]}" --device $dev --precision $p --run-dir "$run" > "$run.out" 2>&1 ||
      { cat "$run.out"; fail "$dev $p run"; }
    # One rounding of 8 (bf16) or 11 (fp16) significant bits per activation, through a dozen layers.
    check "$run" "$E2E_TMP/$dev-fp32" "$([ $p = bf16 ] && echo 0.03 || echo 0.005)" || fail "$dev $p losses"
    if [ $p = fp16 ]; then
      scale=$(json_field "$run/metrics.jsonl" train loss_scale)
      $PY -c "import sys; sys.exit(float('$scale') != 65536)" 2>/dev/null || fail "$dev fp16: loss scale '$scale'"
    fi
  done
done
if ! grep -qw avx512_bf16 /proc/cpuinfo; then
  expect_exit 2 "AVX512" -- "$BUILD/cnntrain" "${args[@]}" --device cpu --precision bf16 --run-dir "$E2E_TMP/x"
fi

expect_exit 2 "options --bn.sync and --precision bf16 exclude each other" -- \
  "$BUILD/cnntrain" "${args[@]}" --device emu --bn.sync true --precision bf16 --run-dir "$E2E_TMP/sync"
