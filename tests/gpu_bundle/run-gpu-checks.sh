#!/usr/bin/env bash
# Every GPU check of cnntrain in one run (docs/gpu.md), writing one report file:
#   run-gpu-checks.sh [REPORT]      (default: ./cnntrain-gpu-report-<host>-<date>.txt)
# 1. glibc and GPU present (else it stops: exit 2 for an old glibc, 3 for no usable GPU); versions.
# 2. The GPU kernel tests, custom kernels and cuDNN/cuBLASLt against the CPU reference (CNN_REQUIRE_GPU=1: a
#    missing GPU fails them), and custom kernels vs cuDNN per ResNet-50 layer shape (timings).
# 3. compute-sanitizer memcheck, racecheck and synccheck over the kernel tests, where the tool exists.
# 4. fmnist_cnn, 200 steps, --device cuda vs cpu: per-step losses within 1e-3 relative (TF32 off).
#    NVML's GPU figures (utilisation, memory, temperature, power) in that cuda run's train events.
#    fmnist_cnn 20 steps in bf16 and fp16 (cuDNN and custom kernels) within the documented tolerances.
# 5. Synthetic ResNet-50 training throughput, 224x224, batch 128 and 256: custom kernels vs cuDNN, fp32 and
#    TF32; bf16 and fp16 at batch 256; PyTorch's torchvision ResNet-50 (channels_last; autocast for 16 bits)
#    beside it when python3 has torch and torchvision.
# 6. NCCL: one-rank init, allreduce and gradient sync (tests/cuda/nccl_gpu_test.cpp).
# Exit status: 0 when every check passed, 1 when one failed. Estimated 5-10 minutes on an H100 (not yet run on one).
set -uo pipefail
CNN_BUNDLE=$(dirname "$(readlink -f "$0")")
report=${1:-$PWD/cnntrain-gpu-report-$(hostname)-$(date +%Y%m%d-%H%M%S).txt}
work=$(mktemp -d "${TMPDIR:-/tmp}/cnntrain-gpu-checks.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=()
say() { echo "$*" | tee -a "$report"; }
section() { say ""; say "== $*"; }
# run NAME SECONDS CMD...: runs CMD with a time limit, its output into the report; records a failure.
run() {
  local name=$1 limit=$2 rc=0
  shift 2
  say "\$ $*"
  timeout "$limit" "$@" >>"$report" 2>&1 || rc=$?
  if ((rc == 0)); then say "-> $name: ok"; else say "-> $name: FAILED (exit $rc$( ((rc == 124)) && echo ", over ${limit}s"))"; failed+=("$name"); fi
  return $rc
}
: >"$report"
say "cnntrain GPU checks, bundle $(cat "$CNN_BUNDLE/VERSION"), $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"

# glibc first: nothing in the bundle starts on an older one.
need=$(cat "$CNN_BUNDLE/GLIBC_MIN")
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -z $have ]] || [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
  say "cnntrain GPU checks: this system's glibc is ${have:-unknown}; the bundle needs glibc >= $need (Debian 12," \
      "Ubuntu 22.10, RHEL 10 or newer). Stopping."
  exit 2
fi
say "glibc $have (bundle needs >= $need)"

# A usable GPU: nvidia-smi answers and lists one.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "cnntrain GPU checks: no GPU: nvidia-smi is not installed (no NVIDIA driver on this machine). Stopping."
  exit 3
fi
if ! gpus=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
  say "cnntrain GPU checks: no GPU: nvidia-smi lists none: $gpus. Stopping."
  exit 3
fi
. "$CNN_BUNDLE/libexec/env.sh"
export CNN_REQUIRE_GPU=1

section "versions"
nvidia-smi >>"$report" 2>&1
say "NVIDIA library directories found: ${CNN_NVIDIA_DIRS:-none}"
for lib in libcudart.so libcudnn.so libcublasLt.so libnccl.so; do
  found=""
  for d in ${CNN_NVIDIA_DIRS//:/ }; do
    for f in "$d"/$lib.*; do [[ -e $f ]] && found="$found $(basename "$(readlink -f "$f")")"; done
  done
  say "  $lib:${found:- NOT FOUND}"
done
say "plugin: $(ldd "$CNN_BUNDLE/lib/libcnntrain-cuda.so" | grep -E 'cudnn|cublas|not found' | tr -s ' \t' ' ')"

section "GPU kernel tests (custom kernels and cuDNN/cuBLASLt vs the CPU reference)"
run backend-sweep 240 "$CNN_BUNDLE/libexec/backend_tests" --gtest_filter='*__cuda*' --gtest_brief=1
run gpu-tests 240 "$CNN_BUNDLE/libexec/cuda_tests" --gtest_filter='*/cuda*' --gtest_brief=1

section "compute-sanitizer over the custom kernel tests"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -z $sanitizer ]]; then
  say "compute-sanitizer: not installed here (skipped)"
else
  for tool in memcheck racecheck synccheck; do
    run "sanitizer-$tool" 120 "$sanitizer" --tool "$tool" --error-exitcode 9 "$CNN_BUNDLE/libexec/backend_tests" \
      --gtest_filter='*__cuda' --gtest_brief=1
  done
fi

section "fmnist_cnn 200 steps: --device cuda vs --device cpu (losses within 1e-3 relative, TF32 off)"
common=(--config "$CNN_BUNDLE/jobs/fashion_mnist.ini" --data.train "$CNN_BUNDLE/data/fmnist_8k.h5" --data.test ""
        --train.max_steps 200 --train.batch 32 --log.every_steps 1 --checkpoint.at_end false --gpu.tf32 false)
run fmnist-cpu 240 "$CNN_BUNDLE/bin/cnntrain" "${common[@]}" --device cpu --threads 4 --run-dir "$work/cpu"
run fmnist-cuda 120 "$CNN_BUNDLE/bin/cnntrain" "${common[@]}" --device cuda --run-dir "$work/cuda"
losses() { sed -n 's/.*"event":"train".*"loss":\([-0-9.eE+]*\).*/\1/p' "$1/metrics.jsonl" 2>/dev/null; }
if paste <(losses "$work/cuda") <(losses "$work/cpu") | awk '
    { n++; r = ($1 - $2) / ($2 == 0 ? 1 : $2); r = r < 0 ? -r : r; if (r > worst) worst = r }
    END { printf "%d steps compared, worst relative difference %.2e\n", n, worst; exit !(n == 200 && worst <= 1e-3) }' \
    | tee -a "$report"; then
  say "-> fmnist-cuda-vs-cpu: ok"
else
  say "-> fmnist-cuda-vs-cpu: FAILED"
  failed+=(fmnist-cuda-vs-cpu)
fi

section "NVML: the GPU figures of the fmnist-cuda run (docs/observability.md)"
# Its last train event: utilisation 0-100 %, a plausible temperature, power drawn, and memory used by all
# processes (NVML) at least the arena's bytes in use and at most the total.
jfield() { sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" <<<"$1"; }
last=$(grep '"event":"train"' "$work/cuda/metrics.jsonl" 2>/dev/null | tail -1)
if awk -v u="$(jfield "$last" gpu_util_pct)" -v t="$(jfield "$last" gpu_temp_c)" -v p="$(jfield "$last" gpu_power_w)" \
    -v used="$(jfield "$last" gpu_mem_used)" -v total="$(jfield "$last" gpu_mem_total)" -v arena="$(jfield "$last" mem_in_use)" '
    BEGIN { printf "utilisation %s%%, temperature %s C, power %s W, memory used %s of %s bytes (arena in use %s)\n",
                   u, t, p, used, total, arena
            exit !(u != "" && t != "" && p != "" && used != "" && total != "" && arena != "" && u >= 0 && u <= 100 &&
                   t > 0 && t < 120 && p > 0 && used + 0 >= arena + 0 && used + 0 <= total + 0) }' | tee -a "$report"; then
  say "-> nvml-figures: ok"
else
  say "-> nvml-figures: FAILED"
  failed+=(nvml-figures)
fi

section "fmnist_cnn 20 steps in bf16 and fp16, cuDNN and the custom kernels (docs/mixed_precision.md, Tolerances)"
# The first loss (same weights and batch, no update yet) within one 16-bit rounding's reach of the fp32 GPU
# run's (3% bf16, 0.5% fp16); every loss within 20% of the fp32 CPU run's; all finite.
for impl in cudnn custom; do
  for prec in bf16 fp16; do
    name="fmnist-$prec-$impl"
    if run "$name" 120 "$CNN_BUNDLE/bin/cnntrain" "${common[@]}" --train.max_steps 20 --device cuda \
        --conv.impl "$impl" --precision "$prec" --run-dir "$work/$name"; then
      first_rtol=$([[ $prec == bf16 ]] && echo 0.03 || echo 0.005)
      if paste <(losses "$work/$name") <(losses "$work/cuda" | head -20) <(losses "$work/cpu" | head -20) | awk -v f="$first_rtol" '
          function rel(a, b) { r = (a - b) / (b == 0 ? 1 : b); return r < 0 ? -r : r }
          { n++; if ($1 != $1 + 0 || $1 == "nan" || $1 == "inf") bad = 1
            if (n == 1) first = rel($1, $2); d = rel($1, $3); if (d > worst) worst = d }
          END { printf "%d steps, first loss within %.1e of fp32 cuda, every loss within %.1e of fp32 cpu\n", n, first, worst
                exit !(n == 20 && !bad && first <= f && worst <= 0.2) }' | tee -a "$report"; then
        say "-> $name-losses: ok"
      else
        say "-> $name-losses: FAILED"
        failed+=("$name-losses")
      fi
    fi
  done
done

section "custom kernels vs cuDNN per ResNet-50 layer shape (batch 32, fp32)"
run layer-speed 180 "$CNN_BUNDLE/libexec/cuda_tests" --gtest_filter='VendorSpeed.*' --gtest_brief=1

section "synthetic ResNet-50 training throughput (224x224, SGD, images/s of the last 20 of 30 steps)"
# resnet50_run IMPL PRECISION TF32 BATCH: sets rate to the images/s of cnntrain's steps 11-30, or to "failed"
# (recorded as a failure). Not for $(...): the failure must reach this shell's list.
resnet50_run() {
  local impl=$1 prec=$2 tf32=$3 batch=$4 dir="$work/r50-$1-$2-$3-$4"
  rate=failed
  if timeout 240 "$CNN_BUNDLE/bin/cnntrain" --model resnet50 --device cuda --conv.impl "$impl" --precision "$prec" \
      --gpu.tf32 "$tf32" --data.synthetic "$((batch * 40))x224x224x3:1000" --train.batch "$batch" \
      --train.max_steps 30 --log.every_steps 10 --checkpoint.at_end false --run-dir "$dir" >"$dir.log" 2>&1; then
    rate=$(sed -n 's/.*"event":"train".*"samples_per_s":\([0-9.eE+]*\).*/\1/p' "$dir/metrics.jsonl" | tail -2 |
           awk '{ s += $1 } END { printf "%.0f", s / NR }')
  else
    failed+=("resnet50-$impl-$prec-tf32$tf32-$batch")
    tail -5 "$dir.log" >>"$report"
  fi
}
torch_ok=0
python3 -c "import torch, torchvision; assert torch.cuda.is_available()" >/dev/null 2>&1 && torch_ok=1
say "$(printf '%-8s %-6s %-6s %12s' impl math batch images/s)"
for batch in 128 256; do
  for tf32 in false true; do
    math=$([[ $tf32 == true ]] && echo tf32 || echo fp32)
    for impl in custom cudnn; do
      resnet50_run "$impl" fp32 "$tf32" "$batch"
      say "$(printf '%-8s %-6s %-6s %12s' "$impl" "$math" "$batch" "$rate")"
    done
    if ((torch_ok)); then
      rate=$(timeout 240 python3 "$CNN_BUNDLE/libexec/torch_resnet50.py" --batch "$batch" --tf32 "$tf32" 2>>"$report" |
             tail -1)
      say "$(printf '%-8s %-6s %-6s %12s' pytorch "$math" "$batch" "${rate:-failed}")"
    fi
  done
done
((torch_ok)) || say "PyTorch: python3 -c 'import torch, torchvision' failed or sees no GPU (no side-by-side rows)"

section "synthetic ResNet-50 mixed-precision training throughput (batch 256; PyTorch: autocast + channels_last)"
say "$(printf '%-8s %-6s %-6s %12s' impl prec batch images/s)"
for prec in bf16 fp16; do
  for impl in cudnn custom; do
    resnet50_run "$impl" "$prec" true 256
    say "$(printf '%-8s %-6s %-6s %12s' "$impl" "$prec" 256 "$rate")"
  done
  if ((torch_ok)); then
    rate=$(timeout 240 python3 "$CNN_BUNDLE/libexec/torch_resnet50.py" --batch 256 --amp "$prec" 2>>"$report" | tail -1)
    say "$(printf '%-8s %-6s %-6s %12s' pytorch "$prec" 256 "${rate:-failed}")"
  fi
done

section "NCCL: one-rank init, allreduce and bucketed gradient sync on the GPU"
run nccl 120 "$CNN_BUNDLE/libexec/cuda_tests" --gtest_filter='NcclOneRank.*' --gtest_brief=1

section "summary"
if ((${#failed[@]})); then
  say "FAILED: ${failed[*]}"
  say "report: $report"
  exit 1
fi
say "all checks passed; report: $report"
