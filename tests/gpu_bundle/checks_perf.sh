# shellcheck shell=bash disable=SC2154,SC2016  # cnntrain, work: run-gpu-checks.sh's; STEP_RESULT: eval'd later
# Speed checks of run-gpu-checks.sh (sourced by it; needs checks_lib.sh, $cnntrain, $work): custom kernels vs
# cuDNN per ResNet-50 layer, and synthetic ResNet-50 training images/s beside PyTorch's on the same GPU.
section "custom kernels vs cuDNN per ResNet-50 layer shape (batch 32, fp32; the table is in logs/vendor-speed.1.log)"
run_gtest_cases vendor-speed "$CNNTRAIN_BUNDLE/libexec/cuda_tests" 'VendorSpeed.*' 240

section "synthetic ResNet-50 training throughput (224x224, SGD, images/s of the last 20 of 30 steps)"
# rate_of METRICS: cnntrain's images/s over steps 11-30 (the last two train events of --log.every_steps 10).
rate_of() {
  sed -n 's/.*"event":"train".*"samples_per_s":\([0-9.eE+]*\).*/\1/p' "$1" 2>/dev/null | tail -2 |
    awk '{ s += $1 } END { if (NR) printf "%.0f\n", s / NR; else print "failed" }'
}
# resnet50_run IMPL PRECISION TF32 BATCH: one check (its detail: images/s); sets rate to the images/s or "failed".
resnet50_run() {
  local impl=$1 prec=$2 tf32=$3 batch=$4 name=resnet50-$1-$2-tf32$3-$4
  rate=failed
  STEP_RESULT='echo "$(rate_of "$work/$name/metrics.jsonl") images/s"' step "$name" 240 "$cnntrain" --model resnet50 \
    --device cuda --conv.impl "$impl" --precision "$prec" --gpu.tf32 "$tf32" --data.synthetic \
    "$((batch * 40))x224x224x3:1000" --train.batch "$batch" --train.max_steps 30 --log.every_steps 10 \
    --checkpoint.at_end false --run-dir "$work/$name" && rate=$(rate_of "$work/$name/metrics.jsonl")
}
# torch_run NAME ARGS...: PyTorch's row, run with the caller's environment (this shell's: nothing of the
# bundle's), or a skip when python3 has no torch/torchvision or no GPU.
torch_ok=0
torch_why=$(timeout -k 5 120 python3 -c "import torch, torchvision; assert torch.cuda.is_available(), 'no GPU for torch'
print(torch.__version__, torchvision.__version__)" 2>&1) && torch_ok=1
version pytorch "$( ((torch_ok)) && echo "$torch_why" || echo none)"
torch_run() {
  local name=$1
  shift
  rate=skipped
  if ((!torch_ok)); then
    record "$name" skip 0 "python3 -c 'import torch, torchvision' failed or sees no GPU: $(tail -n 1 <<<"$torch_why")"
  elif STEP_RESULT='echo "$(tail -n 1 "$LOGS/$name.log") images/s"' step "$name" 240 python3 \
      "$CNNTRAIN_BUNDLE/libexec/torch_resnet50.py" "$@"; then
    rate=$(tail -n 1 "$LOGS/$name.log")
  else
    rate=failed
  fi
}
table=()
row() { table+=("$(printf '%-8s %-6s %-6s %12s' "$@")"); }
# CNNTRAIN_CHECKS_BATCHES (default "128 256"): the batch sizes of the fp32/TF32 rows (a time-limited session
# takes "256" alone); the 16-bit rows are at 256 either way.
for batch in ${CNNTRAIN_CHECKS_BATCHES:-128 256}; do
  [[ $batch =~ ^[1-9][0-9]*$ ]] ||
    { record "perf-batches" fail 0 "CNNTRAIN_CHECKS_BATCHES: '$batch' is no batch size"; continue; }
  for tf32 in false true; do
    math=$([[ $tf32 == true ]] && echo tf32 || echo fp32)
    for impl in custom cudnn; do
      resnet50_run "$impl" fp32 "$tf32" "$batch"
      row "$impl" "$math" "$batch" "$rate"
    done
    torch_run "pytorch-resnet50-$math-$batch" --batch "$batch" --tf32 "$tf32"
    row pytorch "$math" "$batch" "$rate"
  done
done
for prec in bf16 fp16; do
  for impl in cudnn custom; do
    resnet50_run "$impl" "$prec" true 256
    row "$impl" "$prec" 256 "$rate"
  done
  torch_run "pytorch-resnet50-$prec-256" --batch 256 --amp "$prec"
  row pytorch "$prec" 256 "$rate"
done
section "ResNet-50 images/s (PyTorch: torchvision, channels_last, eager; bf16/fp16 with autocast, TF32 on)"
say "$(printf '%-8s %-6s %-6s %12s' impl math batch images/s)"
for line in "${table[@]}"; do say "$line"; done

# Where a step's GPU time goes: one TF32 run at batch 256 traced kernel by kernel (lib/libcnntrain-ktrace.so,
# loaded by the CUDA driver through CUDA_INJECTION64_PATH; CUPTI's activity records), summed per step by
# libexec/kernel_time.sh over steps 7-11. The table goes into the report; its first line is the check's detail.
section "GPU kernel time of a ResNet-50 TF32 training step (batch 256, CUPTI trace of steps 7-11)"
ktrace_lib=$CNNTRAIN_BUNDLE/lib/libcnntrain-ktrace.so
if [[ ! -f $ktrace_lib ]]; then
  record kernel-time skip 0 "the bundle has no kernel tracer (lib/libcnntrain-ktrace.so: CUPTI was not found where it was built)"
elif mkdir -p "$work" && step kernel-trace 240 env CUDA_INJECTION64_PATH="$ktrace_lib" KTRACE_OUT="$work/ktrace.txt" "$cnntrain" \
    --model resnet50 --device cuda --data.synthetic 3072x224x224x3:1000 --train.batch 256 --train.max_steps 12 \
    --log.every_steps 1 --checkpoint.at_end false --run-dir "$work/resnet50-traced"; then
  if bash "$CNNTRAIN_BUNDLE/libexec/kernel_time.sh" "$work/ktrace.txt" 6 15 >"$LOGS/kernel-time.txt" 2>&1; then
    while IFS= read -r line; do say "$line"; done <"$LOGS/kernel-time.txt"
    record kernel-time pass 0 "$(head -n 1 "$LOGS/kernel-time.txt")"
  else
    record kernel-time fail 0 "$(tail -n 1 "$LOGS/kernel-time.txt") (logs/kernel-time.txt, the trace in runs/ktrace.txt)"
  fi
fi
