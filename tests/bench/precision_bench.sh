#!/usr/bin/env bash
# fp32 vs bf16 training images/s on this CPU, cnntrain (the real trainer on generated images: --data.synthetic)
# beside PyTorch 2 (TORCH_PYTHON: build/pyvenv's, from PyPI) in fp32 and under CPU autocast bf16
# (tests/bench/torch_amp_bench.py, eager channels_last), the frameworks alternating run by run. Target (issue 30):
# cnntrain bf16 ResNet-50 >= 1.5x PyTorch 2's autocast bf16. `make bench-precision`;
# PRECISION_BENCH_ARGS="--models resnet20 --reps 3".
# On a CPU without AVX512-BF16/AMX, cnntrain refuses bf16 (the trainer exits 2); the table says "refused" and why.
set -euo pipefail
BUILD=${BUILD:-build}
TORCH_PYTHON=${TORCH_PYTHON:-$BUILD/pyvenv/bin/python}
models="resnet20 resnet50" reps=3 threads=2
while (($#)); do
  case $1 in
    --models) models=${2//,/ }; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "precision_bench.sh: unknown argument '$1' (--models A,B --reps N --threads T)" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d /tmp/cnntrain-precision-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else printf "%.1f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# cnntrain MODEL BATCH STEPS PRECISION: images/s of the steps after the first log interval, or "refused".
cnntrain() {
  local model=$1 batch=$2 steps=$3 prec=$4 shape dir=$tmp/run
  shape=$([ "$model" = resnet50 ] && echo 224x224x3 || echo 32x32x3)
  rm -rf "$dir"
  if ! OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$BUILD/cnntrain" --model "$model" --threads "$threads" \
      --precision "$prec" --data.synthetic "$((batch * (steps + 1)))x$shape:10" --train.batch "$batch" \
      --train.max_steps "$steps" --log.every_steps 1 --checkpoint.at_end false --log.tensorboard false \
      --log.progress lines --run-dir "$dir" >"$tmp/log" 2>&1; then
    grep -q 'AVX512' "$tmp/log" && { echo refused; return; }
    cat "$tmp/log" >&2; echo failed; return
  fi
  # Median of the per-step rates after the first (warm-up) step.
  sed -n 's/.*"event":"train".*"samples_per_s":\([0-9.eE+]*\).*/\1/p' "$dir/metrics.jsonl" | tail -n +2 | median
}

# The CPU (shared VMs change CPUs between sessions; bf16 needs AVX512-BF16 or AMX).
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(grep -c '^processor' /proc/cpuinfo) online CPUs"
printf '%-9s %5s %7s | %12s %12s %7s | %12s %12s %7s\n' model batch threads "cnntrain f32" "cnntrain bf16" ratio \
  "torch2 f32" "torch2 bf16" ratio
for model in $models; do
  if [ "$model" = resnet50 ]; then batch=32 steps=4; else batch=128 steps=10; fi
  declare -A r=()
  for rep in $(seq "$reps"); do
    for prec in fp32 bf16; do
      r[c$prec]+="$(cnntrain "$model" "$batch" "$steps" "$prec") "
      r[t$prec]+="$(OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$TORCH_PYTHON" "$(dirname "$0")/torch_amp_bench.py" --model "$model" --batch "$batch" \
        --threads "$threads" --precision "$prec" --steps "$steps" --reps 1) "
    done
  done
  cf=$(tr ' ' '\n' <<<"${r[cfp32]}" | grep . | median); cb=$(tr ' ' '\n' <<<"${r[cbf16]}" | { grep -E '^[0-9]' || true; } | median)
  tf=$(tr ' ' '\n' <<<"${r[tfp32]}" | grep . | median); tb=$(tr ' ' '\n' <<<"${r[tbf16]}" | grep . | median)
  grep -q refused <<<"${r[cbf16]}" && cb=refused
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }'; }
  printf '%-9s %5d %7d | %12s %12s %7s | %12s %12s %7s\n' "$model" "$batch" "$threads" "$cf" "$cb" "$(ratio "$cb" "$cf")" \
    "$tf" "$tb" "$(ratio "$tb" "$tf")"
  target=""
  [ "$model" = resnet50 ] && target=" (target 1.5x)"
  echo "  cnntrain bf16 / PyTorch autocast bf16: $(ratio "$cb" "$tb")$target; fp32: $(ratio "$cf" "$tf")"
  [ "$cb" = refused ] && echo "  cnntrain refuses --precision bf16 on this CPU: it lacks AVX512_BF16 and AMX-BF16" \
    "(PyTorch's autocast bf16 runs there without them, emulated)"
  unset r
done
