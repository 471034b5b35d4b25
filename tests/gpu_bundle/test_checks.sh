#!/usr/bin/env bash
# run-gpu-checks.sh without a GPU (`make test-gpu-checks`, part of `make test`), under a stand-in nvidia-smi
# (fake_nvidia_smi.sh) that reports an H100:
#   1. the script from this source tree over stand-in programs (a bundle of shell scripts in a scratch
#      directory): with driver 580 every check runs and gets the verdict the stand-ins call for: a gtest case
#      that crashes the process costs that case only (the cases after it pass), one that hangs ignoring SIGTERM
#      is killed at its limit, a training step that ignores SIGTERM too (`timeout -k`), the cuda-vs-cpu
#      comparison passes within the bound set by the spread; a summary, report.json valid and complete, exit 1;
#      again with one process per gtest case (CNNTRAIN_CHECKS_PER_CASE=1): the same verdicts; SIGTERM to the script:
#      exit 143 within seconds, the hanging case killed, report.json still written; driver 535: stop within a
#      minute naming 535 and the ways out (exit 4), unless a forward-compatibility libcuda new enough is on
#      LD_LIBRARY_PATH; no nvidia-smi: "no GPU" (exit 3); CNNTRAIN_CHECKS_ONLY runs the parts it names only;
#      CNNTRAIN_CHECKS_BATCHES=256 leaves out the batch-128 rows;
#   2. with BUNDLE.tar.gz (the CUDA build's `make gpu-bundle`), the real bundle unpacked in a scratch directory:
#      driver 580: every check runs (and fails here, no GPU, except the CPU run), report.json lists them all,
#      exit 1, within minutes; driver 535: exit 4 naming 535; the programs run on the machine's glibc here (as new
#      as the bundle's), on the bundle's when CNNTRAIN_RUNTIME forces it.
#   test_checks.sh [BUNDLE.tar.gz]        (KEEP_TMP=1 keeps the scratch directory with every report)
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_checks.XXXXXX")
trap '[[ -n ${KEEP_TMP:-} ]] || rm -rf "$tmp"' EXIT
fail() { echo "test_checks.sh: FAILED: $*" >&2; exit 1; }
mkdir -p "$tmp/fakebin"
install -m 755 "$src/fake_nvidia_smi.sh" "$tmp/fakebin/nvidia-smi"
export CNNTRAIN_CHECKS_KILL_AFTER=2

# The stand-in bundle: the real scripts, programs that act out the cases above.
b=$tmp/bundle
mkdir -p "$b"/{bin,libexec,jobs,data}
install -m 755 "$src/run-gpu-checks.sh" "$b/"
install -m 644 "$src"/{env,checks_lib,checks_fmnist,checks_runs,checks_perf}.sh "$b/libexec/"
install -m 755 "$src/kernel_time.sh" "$b/libexec/"
echo standin >"$b/VERSION"; echo 13.0.88 >"$b/CUDA_VERSION"; echo 580 >"$b/CUDA_DRIVER_MIN"; echo 2.36 >"$b/GLIBC"
touch "$b/jobs/fashion_mnist.ini" "$b/data/fmnist_8k.h5" "$b/libexec/torch_resnet50.py"
cat >"$b/bin/cnntrain" <<'EOF'
#!/bin/bash
# Stand-in trainer: fmnist runs write losses (cuda: the cpu losses perturbed by 4e-4 relative at most, plus up to
# 3e-4 that differs between default runs: a spread whose 5x exceeds 1e-3), stop at --train.stop_at_step with a
# checkpoint and go on from it with --resume auto; --eval-only writes an eval event; one 16-bit run ignores
# SIGTERM; one ResNet-50 run reports images/s.
args=" $* "
[[ $args == *" --gpu-info "* ]] && { echo "cnntrain: error: unrecognised option '--gpu-info'" >&2; exit 2; }
get() { local a; a=${args#* $1 }; [[ $a == "$args" ]] && return; echo "${a%% *}"; }
dir=$(get --run-dir) device=$(get --device) prec=$(get --precision) impl=$(get --conv.impl)
mkdir -p "$dir"
if [[ $(get --model) == resnet50 ]]; then
  [[ $impl == cudnn && $prec == bf16 ]] || { echo "cnntrain: error: --device cuda: no usable GPU" >&2; exit 1; }
  for s in 10 20 30; do echo "{\"event\":\"train\",\"step\":$s,\"loss\":6.9,\"samples_per_s\":$((1200 + s))}"; done \
    >"$dir/metrics.jsonl"
  exit 0
fi
if [[ $prec == fp16 && $impl == custom ]]; then trap '' TERM; echo "hanging"; sleep 300; fi
if [[ $args == *" --eval-only "* ]]; then
  [[ -f $(get --resume) ]] || { echo "cnntrain: error: --resume $(get --resume): no such checkpoint" >&2; exit 4; }
  acc=0.7534
  [[ ${STANDIN_RUNS_BROKEN:-} == 1 && $device == cpu ]] && acc=0.7535
  echo "{\"event\":\"eval\",\"epoch\":0,\"step\":60,\"test_loss\":0.6646868,\"test_acc\":$acc,\"count\":8192}" \
    >>"$dir/metrics.jsonl"
  exit 0
fi
first=1 last=$(get --train.max_steps)
[[ $(get --resume) == auto && -s $dir/metrics.jsonl ]] &&
  first=$(($(grep -c '"event":"train"' "$dir/metrics.jsonl") + 1))
[[ -n $(get --train.stop_at_step) ]] && last=$(get --train.stop_at_step)
mkdir -p "$dir/checkpoints"
touch "$dir/checkpoints/ckpt-$(printf %010d "$last").h5"
[[ $(get --deterministic) == true ]] && noise=0 || noise=$(( $(printf '%d' "'${dir: -1}") % 7 + 1 ))
drift=0
[[ ${STANDIN_RUNS_BROKEN:-} == 1 && $first -gt 1 ]] && drift=1e-7
awk -v first="$first" -v n="$last" -v dev="$device" -v noise="$noise" -v drift="$drift" 'BEGIN {
  for (i = first; i <= n; i++) { l = 2.3 * exp(-i / 80) * (1 + drift)
    if (dev == "cuda") l *= 1 + 4e-4 * sin((i - 1) * 0.7) + 3e-4 * sin(i * noise) * (noise > 0) * (i > 1)
    printf "{\"event\":\"train\",\"step\":%d,\"loss\":%.9g,\"samples_per_s\":100}\n", i, l } }' >>"$dir/metrics.jsonl"
EOF
cat >"$b/bin/mpirun" <<'EOF'
#!/bin/bash
# Stand-in mpirun -np 2 [--oversubscribe] PROGRAM ARGS on a machine with one GPU: the trainer refuses two ranks
# there unless --gpu.share true (then one process stands in for both).
while [[ $1 == -* ]]; do [[ $1 == -np ]] && shift; shift; done
[[ ${STANDIN_RUNS_BROKEN:-} == 1 ]] && { echo "cnntrain: error: no usable GPU" >&2; exit 1; }
[[ " $* " == *" --gpu.share true "* ]] || { echo "cnntrain: error [rank 0/2 on vm]: host vm: 2 ranks (0,1) run on\
 this node but only 1 GPU is visible; start one rank per GPU, or let ranks share GPUs with --gpu.share true" >&2
  exit 2; }
exec "$@"
EOF
# The gtest stand-ins: list_cases FILTER NAME... prints the names FILTER (a gtest glob) takes, as
# --gtest_list_tests does; run_case NAME acts out the case its name says.
cat >"$b/libexec/gtest_standin.sh" <<'EOF'
list_cases() {
  local filter=$1 name suite=""
  shift
  for name in "$@"; do
    [[ $name == $filter ]] || continue
    [[ ${name%%.*}. == "$suite" ]] || { suite=${name%%.*}.; echo "$suite"; }
    echo "  ${name#*.}"
  done
}
run_case() {
  echo "[ RUN      ] $1"
  case $1 in
    *ok*) echo "[       OK ] $1 (1000 ms)" ;;
    *bad*) echo "sweep.cpp:10: Failure"; echo "conv2d_forward: element 3: got 1 want 2"
           echo "[  FAILED  ] $1, where GetParam() = 8-byte object <00> (3 ms)"; rc=1 ;;
    *crash*) echo "CUDA error: an illegal memory access was encountered"; kill -SEGV $$ ;;
    *hang*) trap '' TERM; echo $$ >"${STANDIN_PIDS:-/dev/null}"; sleep 300 ;;
    *) printf 'no GPU: cudaErrorInsufficientDriver\n[  FAILED  ] %s (0 ms)\n' "$1"; rc=1 ;;
  esac
}
# standin_main ARGS: --gtest_list_tests --gtest_filter=F, or --gtest_filter=NAME:NAME... (in $cases' order).
standin_main() {
  local filter name
  rc=0
  filter=$(printf '%s\n' "$@" | sed -n 's/^--gtest_filter=//p')
  if [[ $* == *--gtest_list_tests* ]]; then list_cases "$filter" $cases; exit 0; fi
  for name in $cases; do [[ ":$filter:" == *":$name:"* ]] && run_case "$name"; done
  exit $rc
}
EOF
for bin in backend_tests cuda_tests; do
  printf '#!/bin/bash\n. "$(dirname "$0")/gtest_standin.sh"\n' >"$b/libexec/$bin"
done
echo 'cases="Backends/Sweep.MatchesReference/ok1__cuda Backends/Sweep.MatchesReference/bad__cuda
  Backends/Sweep.MatchesReference/crash__cuda Backends/Sweep.MatchesReference/ok2__cuda
  Backends/Sweep.MatchesReference/hang__cuda Backends/Sweep.MatchesReference/ok3__cuda
  Backends/Sweep.MatchesReference/ok1__cpu_t1"; standin_main "$@"' >>"$b/libexec/backend_tests"
echo 'cases="Targets/Training.TwentyStepsMatchReference/cuda Targets/Training.TwentyStepsMatchReference/emu
  VendorSpeed.ResNet50LayersCustomVsCudnn NcclOneRank.AllreduceAndGradSyncOnTheGpu"; standin_main "$@"' \
  >>"$b/libexec/cuda_tests"
cat >"$tmp/fakebin/python3" <<EOF
#!/bin/sh
# Stand-in python3 without torch, which records the library path it was started with.
echo "LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-}" >>"$tmp/python.env"
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
EOF
cat >"$tmp/fakebin/compute-sanitizer" <<'EOF'
#!/bin/bash
# Stand-in compute-sanitizer: memcheck and synccheck clean, racecheck reports a hazard.
[[ $2 == racecheck ]] && { echo "========= ERROR SUMMARY: 1 error"; exit 9; }
echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod 755 "$b/bin/cnntrain" "$b/bin/mpirun" "$b/libexec/backend_tests" "$b/libexec/cuda_tests" "$tmp/fakebin/"*

sweep=backend-sweep/Backends/Sweep.MatchesReference
expect_standin=(gpu=pass driver=pass gpu-info=fail "$sweep/ok1__cuda=pass" "$sweep/bad__cuda=fail"
  "$sweep/crash__cuda=fail" "$sweep/ok2__cuda=pass" "$sweep/hang__cuda=fail" "$sweep/ok3__cuda=pass"
  cuda-tests/=fail sanitizer-memcheck=pass sanitizer-racecheck=fail sanitizer-synccheck=pass
  fmnist-cuda-a=pass fmnist-cuda-b=pass fmnist-cuda-det-a=pass fmnist-cuda-det-b=pass fmnist-cpu-det=pass
  fmnist-gpu-spread=pass fmnist-deterministic-repeat=pass fmnist-cuda-vs-cpu=pass nvml-figures=fail
  fmnist-bf16-cudnn-losses=pass
  fmnist-fp16-cudnn-losses=pass fmnist-bf16-custom-losses=pass fmnist-fp16-custom=fail vendor-speed/=fail
  resnet50-cudnn-bf16-tf32true-256=pass resnet50-custom-fp32-tf32false-128=fail pytorch-resnet50-fp32-128=skip
  pytorch-resnet50-fp16-256=skip nccl/=fail run-whole=pass run-stopped=pass run-resumed=pass resume-exact=pass
  eval-cuda=pass eval-cpu=pass eval-cuda-vs-cpu=pass two-ranks-one-gpu-refused=pass two-ranks-gpu-share=pass
  kernel-time=skip)
detail() { python3 -c 'import json, sys
print({c["name"]: c["detail"] for c in json.load(open(sys.argv[1]))["checks"]}[sys.argv[2]])' "$1" "$2"; }

# standin_run OUT [VAR=value...]: run-gpu-checks.sh over the stand-ins; its exit status.
standin_run() {
  local out=$1 rc=0
  shift
  timeout -k 5 240 env PATH="$tmp/fakebin:$PATH" CNNTRAIN_CHECKS_MAX_STEP_S=4 STANDIN_PIDS="$tmp/hang.pid" "$@" \
    "$b/run-gpu-checks.sh" "$out" >"$out.console" 2>&1 || rc=$?
  return $rc
}
t0=$SECONDS rc=0
standin_run "$tmp/out1" || rc=$?
((rc == 1)) || { cat "$tmp/out1.console"; fail "stand-ins, driver 580: exit $rc, expected 1"; }
python3 "$src/check_report.py" "$tmp/out1/report.json" "${expect_standin[@]}" || fail "stand-ins: report.json"
[[ $(detail "$tmp/out1/report.json" "$sweep/crash__cuda") == *"signal 11 (SEGV)): CUDA error: an illegal memory access"* ]] ||
  fail "the crashed case's detail: $(detail "$tmp/out1/report.json" "$sweep/crash__cuda")"
[[ $(detail "$tmp/out1/report.json" "$sweep/hang__cuda") == *"over its 4s limit"* ]] || fail "the hanging case's detail"
[[ $(detail "$tmp/out1/report.json" fmnist-fp16-custom) == *"killed"* ]] || fail "the step ignoring SIGTERM was not killed"
[[ $(detail "$tmp/out1/report.json" resnet50-cudnn-bf16-tf32true-256) == "1225 images/s" ]] || fail "images/s detail"
[[ $(detail "$tmp/out1/report.json" fmnist-cuda-vs-cpu) =~ "<= "([0-9.e+-]+)" (spread "([0-9.e+-]+)")" ]] &&
  awk -v t="${BASH_REMATCH[1]}" -v s="${BASH_REMATCH[2]}" 'BEGIN { d = t - 5 * s; exit !(s > 2e-4 && d * d < 1e-6 * t * t) }' ||
  fail "the cuda-vs-cpu bound is not 5x the spread: $(detail "$tmp/out1/report.json" fmnist-cuda-vs-cpu)"
grep -q "^backend-sweep: 6 cases: 3 pass, 3 fail, 0 skip in .* (3 processes)" "$tmp/out1/report.txt" || fail "3 processes"
grep -q "^== summary" "$tmp/out1/report.txt" && [[ -s $tmp/out1/logs/fmnist-cpu-det.log ]] || fail "summary or logs"
echo "ok: stand-ins, driver 580: every check ran, exit 1, a crash cost one case, hangs killed ($((SECONDS - t0)) s)"

rc=0
standin_run "$tmp/out2" CNNTRAIN_CHECKS_PER_CASE=1 || rc=$?
((rc == 1)) && python3 "$src/check_report.py" "$tmp/out2/report.json" "${expect_standin[@]}" >/dev/null ||
  fail "CNNTRAIN_CHECKS_PER_CASE=1: exit $rc or report.json"
grep -q "^backend-sweep: 6 cases: 3 pass, 3 fail, 0 skip in .* (6 processes)" "$tmp/out2/report.txt" ||
  fail "CNNTRAIN_CHECKS_PER_CASE=1: not one process per case"
echo "ok: CNNTRAIN_CHECKS_PER_CASE=1: the same verdicts, one process per case"

# SIGTERM while the hanging case runs: the report is written, nothing is left running.
rm -f "$tmp/hang.pid"
(exec env PATH="$tmp/fakebin:$PATH" CNNTRAIN_CHECKS_MAX_STEP_S=60 STANDIN_PIDS="$tmp/hang.pid" "$b/run-gpu-checks.sh" \
  "$tmp/out3" >"$tmp/out3.console" 2>&1) &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/hang.pid ]] && break; sleep 0.2; done
[[ -s $tmp/hang.pid ]] || fail "the hanging stand-in case never started"
t0=$SECONDS
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
((rc == 143 && SECONDS - t0 <= 8)) || fail "SIGTERM: exit $rc after $((SECONDS - t0)) s, expected 143 within 8 s"
python3 "$src/check_report.py" "$tmp/out3/report.json" interrupted=fail "$sweep/ok1__cuda=pass" >/dev/null ||
  fail "SIGTERM: report.json"
state=$(awk '{ print $3 }' "/proc/$(cat "$tmp/hang.pid")/stat" 2>/dev/null || true)  # a zombie is gone (PID 1 may not reap)
[[ -z $state || $state == Z* ]] || fail "SIGTERM: the hanging case still runs ($state)"
echo "ok: SIGTERM: exit 143 in $((SECONDS - t0)) s, report.json written, the hanging case gone"

# driver_stops BUNDLE OUT: driver 535 stops within a minute naming it; no nvidia-smi: "no GPU".
driver_stops() {
  local bundle=$1 out=$2 rc=0 t0=$SECONDS
  FAKE_DRIVER=535.129.03 PATH="$tmp/fakebin:$PATH" timeout 60 "$bundle/run-gpu-checks.sh" "$out" >"$out.console" 2>&1 || rc=$?
  ((rc == 4)) && grep -q "535.129.03 is older than the CUDA 13.0.88 runtime.*cuda-compat-13-0" "$out.console" ||
    { cat "$out.console"; fail "$bundle, driver 535: exit $rc, expected 4 naming 535 and cuda-compat"; }
  python3 "$src/check_report.py" "$out/report.json" gpu=pass driver=fail >/dev/null || fail "driver 535: report.json"
  echo "ok: $bundle, driver 535: exit 4 in $((SECONDS - t0)) s: $(grep -o 'the NVIDIA driver 535[^,]*' "$out.console" | head -1)"
  rc=0
  PATH=/usr/bin:/bin "$bundle/run-gpu-checks.sh" "$out-nogpu" >"$out-nogpu.console" 2>&1 || rc=$?
  ((rc == 3)) && grep -q "no GPU" "$out-nogpu.console" || fail "$bundle without nvidia-smi: exit $rc"
  python3 "$src/check_report.py" "$out-nogpu/report.json" gpu=fail >/dev/null || fail "no GPU: report.json"
}
driver_stops "$b" "$tmp/out4"
# Driver 535 with NVIDIA's forward-compatibility libcuda (580) in a directory of LD_LIBRARY_PATH: no stop.
mkdir -p "$tmp/compat"
touch "$tmp/compat/libcuda.so.1" "$tmp/compat/libcuda.so.580.65.06"
rc=0
standin_run "$tmp/out7" FAKE_DRIVER=535.129.03 LD_LIBRARY_PATH="$tmp/compat" CNNTRAIN_CHECKS_MAX_STEP_S=1 \
  CNNTRAIN_CHECKS_KILL_AFTER=1 || rc=$?
((rc == 1)) && python3 "$src/check_report.py" "$tmp/out7/report.json" driver=pass fmnist-cpu-det=pass >/dev/null ||
  fail "driver 535 with the forward-compatibility libcuda: exit $rc, $(grep -- '-> driver' "$tmp/out7.console")"
rc=0
standin_run "$tmp/out8" CNNTRAIN_CHECKS_ONLY="nccl fmnist" || rc=$?
((rc == 1)) && python3 "$src/check_report.py" "$tmp/out8/report.json" gtest=skip sanitizer=skip perf=skip \
  nccl/=fail fmnist-cuda-vs-cpu=pass >/dev/null && ! grep -q backend-sweep "$tmp/out8/report.json" ||
  fail "CNNTRAIN_CHECKS_ONLY='nccl fmnist': exit $rc or other parts ran"
echo "ok: CNNTRAIN_CHECKS_ONLY='nccl fmnist' runs those parts only"
rc=0
standin_run "$tmp/out9" CNNTRAIN_CHECKS_ONLY=perf CNNTRAIN_CHECKS_BATCHES=256 || rc=$?
((rc == 1)) && python3 "$src/check_report.py" "$tmp/out9/report.json" resnet50-cudnn-fp32-tf32true-256 \
  resnet50-cudnn-bf16-tf32true-256=pass >/dev/null && ! grep -q -- '-128"' "$tmp/out9/report.json" ||
  fail "CNNTRAIN_CHECKS_BATCHES=256: exit $rc or batch 128 ran"
echo "ok: CNNTRAIN_CHECKS_BATCHES=256 runs the fp32 rows at batch 256 only"
# The runs part fails what it should: a resumed run 1e-7 off, a cpu evaluation one image apart, two ranks refused
# for another reason than the GPU count.
rc=0
standin_run "$tmp/out10" CNNTRAIN_CHECKS_ONLY=runs STANDIN_RUNS_BROKEN=1 || rc=$?
((rc == 1)) && python3 "$src/check_report.py" "$tmp/out10/report.json" run-resumed=pass resume-exact=fail \
  eval-cpu=pass eval-cuda-vs-cpu=fail two-ranks-one-gpu-refused=fail two-ranks-gpu-share=fail >/dev/null ||
  fail "STANDIN_RUNS_BROKEN=1: exit $rc or a broken run passed: $(grep -- '-> ' "$tmp/out10/report.txt" | tail -n 6)"
echo "ok: the runs part fails an inexact resume, a cuda/cpu evaluation mismatch and a wrong refusal"
echo "ok: driver 535 with a forward-compatibility libcuda 580 on LD_LIBRARY_PATH: $(grep -o 'driver 535[^(]*' \
  "$tmp/out7/report.txt" | head -1)"

# kernel_time.sh over a made-up trace: 9 steps of 10 ms (input preparation 1 ms, a custom batch norm 2 ms, a
# cuDNN convolution 3 ms and a custom one 1 ms overlapping it on another stream, a 1 ms copy), out of order as
# CUPTI's buffers give them; steps 7-8 are summed (the 9th is cut off by the end of the trace).
awk 'BEGIN { print "# kernel_trace"
  for (s = 0; s < 9; s++) { t = 1000000000 + s * 10000000
    printf "K %d %d 7 _ZN3cnn3gpu12_GLOBAL__N_121batchnorm_apply_kernelIfEEvmi\n", t + 1000000, t + 3000000
    printf "K %d %d 7 sm90_xmma_fprop_implicit_gemm_tf32_cudnn\n", t + 4000000, t + 7000000
    printf "K %d %d 9 _ZN3cnn3gpu12_GLOBAL__N_116conv_fwd_kernelEv\n", t + 6000000, t + 7000000
    printf "C %d %d 7 4096\n", t + 8000000, t + 9000000
    printf "K %d %d 7 _ZN3cnn3gpu12_GLOBAL__N_117sgd_update_kernelEv\n", t + 9500000, t + 9500100
    printf "K %d %d 7 _ZN3cnn3gpu12_GLOBAL__N_121prepare_images_kernelEiiii\n", t, t + 1000000 } }' >"$tmp/ktrace.txt"
kt=$(bash "$src/kernel_time.sh" "$tmp/ktrace.txt" 6 10) || fail "kernel_time.sh on a made-up trace: exit $?"
grep -q "^steps 7-8 (2), 10.0 ms per step: GPU busy 7.0 ms (70%), kernel time 8.0 ms" <<<"$kt" &&
  grep -Eq "^ +0.00 +1.0 +0.1  .*sgd_update_kernel" <<<"$kt" &&
  grep -Eq "^  batch norm \(custom\) +2.00$" <<<"$kt" &&
  grep -Eq "^  convolution/matmul \(cuDNN, cuBLASLt\) +3.00$" <<<"$kt" &&
  grep -Eq "^  convolution/matmul \(custom\) +1.00$" <<<"$kt" && grep -Eq "^  copies and fills +1.00$" <<<"$kt" &&
  grep -Eq "^ +3.00 +1.0 +3000.0  sm90_xmma_fprop" <<<"$kt" ||
  fail "kernel_time.sh's sums of a made-up trace: $kt"
# The same trace with CUPTI's real timestamps (ns since the epoch, 19 digits: beyond a double's exact integers):
# the same sums, the 100 ns kernel still 0.1 us.
awk '/^[KCS] / { $2 = "179580129" $2; $3 = "179580129" $3 } { print }' "$tmp/ktrace.txt" >"$tmp/ktrace19.txt"
[[ $(bash "$src/kernel_time.sh" "$tmp/ktrace19.txt" 6 10) == "$kt" ]] ||
  fail "kernel_time.sh with 19-digit timestamps: $(bash "$src/kernel_time.sh" "$tmp/ktrace19.txt" 6 10)"
! bash "$src/kernel_time.sh" "$tmp/ktrace.txt" 8 2>"$tmp/kt.err" && grep -q "9 steps traced" "$tmp/kt.err" ||
  fail "kernel_time.sh with too few steps after the skip: $(cat "$tmp/kt.err")"
echo "# dropped 12 records" >>"$tmp/ktrace.txt"
! bash "$src/kernel_time.sh" "$tmp/ktrace.txt" 2>"$tmp/kt.err" && grep -q "dropped records" "$tmp/kt.err" ||
  fail "kernel_time.sh summed a trace that lost records: $(cat "$tmp/kt.err")"
echo "ok: kernel_time.sh sums a trace per step by kind of work, exactly with 19-digit timestamps, refuses too few steps and lost records"

[[ -n ${1:-} ]] || { echo "test_checks.sh: passed (stand-ins only: no bundle given)"; exit 0; }
mkdir "$tmp/real"
tar -C "$tmp/real" -xzf "$1"
real=$tmp/real/cnntrain-gpu
t0=$SECONDS rc=0
rm -f "$tmp/python.env"
LD_LIBRARY_PATH=/caller/lib PATH="$tmp/fakebin:$PATH" timeout 600 "$real/run-gpu-checks.sh" "$tmp/out5" \
  >"$tmp/out5.console" 2>&1 || rc=$?
((rc == 1)) || { tail -n 40 "$tmp/out5.console"; fail "real bundle, driver 580: exit $rc, expected 1"; }
python3 "$src/check_report.py" "$tmp/out5/report.json" gpu=pass driver=pass gpu-info backend-sweep/=fail \
  cuda-tests/=fail sanitizer-memcheck sanitizer-racecheck sanitizer-synccheck fmnist-cuda-a=fail fmnist-cuda-b \
  fmnist-cuda-det-a fmnist-cuda-det-b fmnist-cpu-det=pass fmnist-gpu-spread=fail fmnist-deterministic-repeat=fail \
  fmnist-cuda-vs-cpu=fail nvml-figures=fail fmnist-bf16-cudnn fmnist-fp16-cudnn fmnist-bf16-custom fmnist-fp16-custom \
  vendor-speed/=fail resnet50-custom-fp32-tf32false-128=fail resnet50-cudnn-fp16-tf32true-256=fail pytorch-resnet50-fp32-128 \
  pytorch-resnet50-fp16-256 nccl/=fail run-whole=fail run-stopped=fail resume-exact=fail eval-cuda=fail eval-cpu \
  eval-cuda-vs-cpu=fail two-ranks-one-gpu-refused=fail two-ranks-gpu-share=fail kernel-trace=fail ||
  fail "real bundle: report.json"
echo "ok: real bundle, driver 580: every check ran (here: failed, no GPU), exit 1 in $((SECONDS - t0)) s"
# Python (PyTorch's rows, the wrappers' site-packages search) ran with the caller's library path, nothing of the
# bundle's; the bundle's programs got the caller's path after their own libraries.
[[ -s $tmp/python.env ]] && ! grep -vxF "LD_LIBRARY_PATH=/caller/lib" "$tmp/python.env" ||
  fail "python3 ran with another library path than the caller's: $(sort -u "$tmp/python.env" 2>/dev/null)"
grep -q "library_path: $real/lib:/caller/lib" "$tmp/out5/report.txt" || fail "the bundle's library path"
# The newer runtime wins: here the machine's glibc is the bundle's own version, so the machine's loader and libc;
# forced to the bundle's (what an older machine gets), the programs run on lib/glibc.
grep -q "runtime: glibc: the machine's, libstdc++: the machine's" "$tmp/out5/report.txt" ||
  fail "runtime choice: $(grep runtime: "$tmp/out5/report.txt")"
for rt in host bundle; do
  libc=$(CNNTRAIN_RUNTIME="$rt $rt" LD_DEBUG=libs "$real/bin/cnntrain" --help 2>&1 >/dev/null |
         grep 'calling init: .*/libc\.so\.6' | tail -n 1)
  if [[ $rt == bundle ]]; then [[ $libc == *"$real/lib/glibc/libc.so.6"* ]]
  else [[ -n $libc && $libc != *"$real/"* ]]; fi || fail "CNNTRAIN_RUNTIME='$rt $rt': the program ran on '${libc##* }'"
done
echo "ok: the machine's glibc by default (as new as the bundle's), the bundle's when forced"
echo "ok: python3 ran $(wc -l <"$tmp/python.env") times, each with the caller's LD_LIBRARY_PATH only"
driver_stops "$real" "$tmp/out6"
echo "test_checks.sh: passed"
