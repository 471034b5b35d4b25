#!/usr/bin/env bash
# Every GPU check of cnntrain in one run (docs/gpu.md):
#   run-gpu-checks.sh [OUTDIR]      (default: ./cnntrain-gpu-report-<host>-<date>)
# writes OUTDIR/report.txt (what is printed), OUTDIR/report.json ({"versions":{...},"checks":[{"name",
# "status":"pass|fail|skip","seconds","detail"}]}) and every step's full output under OUTDIR/logs; always,
# also when checks fail, a step overruns its limit or the script gets SIGINT/SIGTERM.
# 1. Preflight, within seconds: GPUs and driver (nvidia-smi), the CUDA runtime the bundle was built with and
#    the driver it needs (stop, exit 4, when the driver is older; no GPU: stop, exit 3), `cnntrain --gpu-info`.
# 2. The GPU gtest cases, each with its own verdict and time limit: the backend sweep's cuda and cuda_vendor
#    targets (custom kernels and cuDNN/cuBLASLt against the CPU reference), the CUDA training test.
# 3. NCCL on one GPU: init, allreduce, bucketed gradient sync.
# 4. fmnist_cnn, 200 steps: the GPU-vs-GPU spread of two default runs, two --deterministic runs bit-identical,
#    and --device cuda vs cpu (both --deterministic, TF32 off) within a tolerance set by the spread; then 20 steps
#    in bf16 and fp16 through cuDNN and the custom kernels within the documented tolerances.
# 5. Runs: stopped and resumed = uninterrupted (losses identical), --eval-only of a checkpoint on cuda = on cpu,
#    two ranks on one GPU refused naming --gpu.share and trained with it (two GPUs: two ranks train).
# 6. compute-sanitizer memcheck, racecheck and synccheck over the custom kernels' sweep, where the tool exists.
# 7. Custom kernels vs cuDNN per ResNet-50 layer shape; synthetic ResNet-50 training images/s, fp32, TF32, bf16
#    and fp16, beside PyTorch's on the same GPU when python3 has torch and torchvision.
# CNNTRAIN_CHECKS_ONLY="gtest nccl fmnist runs sanitizer perf" (default: all) selects parts 2-7 (preflight always
# runs).
# Exit status: 0 when every check passed, 1 when one failed, 3 no GPU, 4 driver too old, 130/143 interrupted.
# About 8-9 minutes on an H100 (2026-11-26). Python (PyTorch's rows) runs with the caller's
# environment: the bundle's programs get their libraries through their wrappers, never through this shell.
set -uo pipefail
CNNTRAIN_BUNDLE=$(dirname "$(readlink -f "$0")")
OUT=${1:-$PWD/cnntrain-gpu-report-$(uname -n)-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || { echo "run-gpu-checks.sh: cannot create the output directory $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
. "$CNNTRAIN_BUNDLE/libexec/checks_lib.sh"
work=$OUT/runs
mkdir -p "$work"
cnntrain=$CNNTRAIN_BUNDLE/bin/cnntrain

section "preflight"
say "cnntrain GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), output in $OUT"
version bundle "$(cat "$CNNTRAIN_BUNDLE/VERSION")"
version cuda_runtime "$(cat "$CNNTRAIN_BUNDLE/CUDA_VERSION")"
version driver_min "$(cat "$CNNTRAIN_BUNDLE/CUDA_DRIVER_MIN")"
version bundle_glibc "$(cat "$CNNTRAIN_BUNDLE/GLIBC")"
version host_glibc "$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $NF }')"
version os "$( (. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}") || echo unknown)"
version kernel "$(uname -r)"
# What the wrappers give the loader:
version library_path "$(. "$CNNTRAIN_BUNDLE/libexec/env.sh"; echo "$CNNTRAIN_LIBRARY_PATH")"
version runtime "$(. "$CNNTRAIN_BUNDLE/libexec/env.sh"; set -- $CNNTRAIN_RUNTIME
  echo "glibc: the $( [ "$1" = host ] && echo "machine's" || echo "bundle's"), libstdc++: the $(
  [ "$2" = host ] && echo "machine's" || echo "bundle's") (the newer of each)")"

if ! command -v nvidia-smi >/dev/null 2>&1; then
  record gpu fail 0 "no GPU: nvidia-smi is not installed (no NVIDIA driver on this machine)"
  finish 3
fi
smi_rc=0
gpus=$(timeout -k 5 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1) || smi_rc=$?
if ((smi_rc != 0)) || [[ -z $gpus || $gpus == *"No devices"* || $gpus == *"NVIDIA-SMI has failed"* ]]; then
  record gpu fail 0 "no GPU: nvidia-smi lists none: $gpus"
  finish 3
fi
timeout -k 5 30 nvidia-smi >"$LOGS/nvidia-smi.log" 2>&1
version gpus "$(cut -d, -f1 <<<"$gpus" | sed 's/^ *//' | paste -sd';' -)"
driver=$(head -n 1 <<<"$gpus" | awk -F', *' '{ print $2 }')
version driver "$driver"
if ! [[ $driver =~ ^[0-9]+\. ]]; then
  record driver fail 0 "cannot read the driver version from nvidia-smi: $(head -n 1 <<<"$gpus")"
  finish 4
fi
record gpu pass 0 "$(wc -l <<<"$gpus") GPU(s): $(head -n 1 <<<"$gpus")"

# The runtime refuses a driver older than it needs (cudaErrorInsufficientDriver at the first call). NVIDIA's
# forward-compatibility package puts a newer libcuda in a directory of its own (cuda-compat-13-0:
# /usr/local/cuda-13.0/compat), which the caller adds to LD_LIBRARY_PATH: then the old kernel driver is fine.
need=$(cat "$CNNTRAIN_BUNDLE/CUDA_DRIVER_MIN")
runtime=$(cat "$CNNTRAIN_BUNDLE/CUDA_VERSION")
compat=""
for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do
  for f in "$d"/libcuda.so.[0-9]*; do
    [[ -f $f ]] && v=${f##*/libcuda.so.} && ((${v%%.*} >= need)) && compat=$f
  done
done
if ((${driver%%.*} >= need)); then
  record driver pass 0 "driver $driver, CUDA $runtime needs >= $need"
elif [[ -n $compat ]]; then
  record driver pass 0 "driver $driver with NVIDIA's forward-compatibility libcuda $compat\
 (CUDA $runtime needs >= $need)"
else
  mm=$(cut -d. -f1-2 <<<"$runtime")
  record driver fail 0 "the NVIDIA driver $driver is older than the CUDA $runtime runtime of this bundle needs\
 (>= $need). Ways out: install driver $need or newer; or, on a datacenter GPU (A100, H100, ...), NVIDIA's CUDA\
 forward-compatibility package (cuda-compat-${mm/./-} from NVIDIA's CUDA repository) with\
 LD_LIBRARY_PATH=/usr/local/cuda-$mm/compat set before running this script"
  finish 4
fi
STEP_DETAIL="see logs/gpu-info.log" step gpu-info 60 "$cnntrain" --gpu-info

part_gtest() {
  section "GPU gtest cases (custom kernels and cuDNN/cuBLASLt vs the CPU reference; CUDA training)"
  run_gtest_cases backend-sweep "$CNNTRAIN_BUNDLE/libexec/backend_tests" '*__cuda*' 90
  run_gtest_cases cuda-tests "$CNNTRAIN_BUNDLE/libexec/cuda_tests" '*/cuda*' 120
}

part_nccl() {
  section "NCCL on one GPU: init, allreduce, bucketed gradient sync"
  run_gtest_cases nccl "$CNNTRAIN_BUNDLE/libexec/cuda_tests" 'NcclOneRank.*' 120
}

part_fmnist() { . "$CNNTRAIN_BUNDLE/libexec/checks_fmnist.sh"; }

part_runs() { . "$CNNTRAIN_BUNDLE/libexec/checks_runs.sh"; }

part_sanitizer() {
  section "compute-sanitizer over the custom kernels' sweep"
  local sanitizer tool
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    "$CNNTRAIN_BUNDLE/compute-sanitizer/compute-sanitizer" 2>/dev/null | head -n 1 || true)
  [[ -z $sanitizer ]] || version compute_sanitizer "$sanitizer"
  for tool in memcheck racecheck synccheck; do
    if [[ -z $sanitizer ]]; then
      record "sanitizer-$tool" skip 0 "no compute-sanitizer (the bundle was built with BUNDLE_SANITIZER=0, and\
 the machine has none on PATH or in /usr/local/cuda/bin)"
    else
      # The target is a wrapper script that execs the bundle's loader: --target-processes all follows it.
      step "sanitizer-$tool" 300 env CNNTRAIN_REQUIRE_GPU=1 "$sanitizer" --tool "$tool" --error-exitcode 9 \
        --target-processes all "$CNNTRAIN_BUNDLE/libexec/backend_tests" --gtest_filter='Backends/Sweep.*__cuda' \
        --gtest_brief=1
    fi
  done
}

# The longest part, last: the one a time-limited GPU session can most afford to lose.
part_perf() { . "$CNNTRAIN_BUNDLE/libexec/checks_perf.sh"; }

# CNNTRAIN_CHECKS_ONLY="gtest nccl ..." runs only those parts (a GPU session whose commands are time-limited can
# split the run); the others are recorded as skipped.
for part in gtest nccl fmnist runs sanitizer perf; do
  if [[ " ${CNNTRAIN_CHECKS_ONLY:-$part} " == *" $part "* ]]; then
    "part_$part"
  else
    record "$part" skip 0 "not selected (CNNTRAIN_CHECKS_ONLY=$CNNTRAIN_CHECKS_ONLY)"
  fi
done
finish
