#!/usr/bin/env bash
# --precision bf16/fp16 trains a ResNet (batch norm fused with its ReLU and with the residual join, ReLU fused
# into max pooling where the model has it) on the CPU and under the emulator (the CUDA kernels templated on the
# storage type) for 20 steps: every step's loss is finite; the first one (same initial weights and batch) is
# within the type's rounding of the same device's fp32 run; every one is within the documented tolerance of
# the fp32 CPU run's (docs/mixed_precision.md, "Tolerances"); fp16 reports its loss scale. Synchronised batch
# norm with 16-bit activations is refused with exit code 2 naming both options (docs/mixed_precision.md).
source "$(dirname "$0")/lib.bash"
args=(--model fmnist_resnet --data.synthetic 64x16x16x1:10 --data.test "" --train.max_steps 20 --train.batch 8
      --train.lr 0.02 --log.every_steps 1 --checkpoint.at_end false --log.tensorboard false)
# Every step within this relative distance of the fp32 CPU run's loss: 20 SGD steps on 64 random-label images
# amplify the 16-bit roundings; measured at most 10% (bf16) and 9% (fp16) on the CPU and under the emulator
# (2026-11-23).
STEP_RTOL=0.2

# check RUN REF RTOL CPU_REF: finite losses; the first within RTOL of REF's; each within STEP_RTOL of CPU_REF's.
check() {
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "$4/metrics.jsonl" "$STEP_RTOL" <<'PY'
import json, math, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
a, b, c = losses(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[4])
rtol, step_rtol = float(sys.argv[3]), float(sys.argv[5])
assert len(a) == len(b) == len(c) == 20, f"expected 20 train events, got {len(a)}, {len(b)} and {len(c)}"
assert all(math.isfinite(l) for l in a), f"non-finite loss: {a}"
err = abs(a[0] - b[0]) / abs(b[0])
assert err <= rtol, f"first loss {a[0]} vs fp32 {b[0]}: {err:.2e} relative > {rtol}"
drift = [abs(x - y) / abs(y) for x, y in zip(a, c)]
worst = max(range(20), key=lambda i: drift[i])
assert drift[worst] <= step_rtol, (f"step {worst + 1}: loss {a[worst]} vs fp32 cpu {c[worst]}: {drift[worst]:.2e} "
                                   f"relative > {step_rtol}; losses {a} vs {c}")
print(f"ok: 20 losses from {a[0]:.4f} to {a[-1]:.4f}, the first within {err:.1e} of fp32, every one within "
      f"{drift[worst]:.1e} of fp32 cpu")
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
    check "$run" "$E2E_TMP/$dev-fp32" "$([ $p = bf16 ] && echo 0.03 || echo 0.005)" "$E2E_TMP/cpu-fp32" ||
      fail "$dev $p losses"
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
