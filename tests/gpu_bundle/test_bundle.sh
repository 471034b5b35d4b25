#!/usr/bin/env bash
# The GPU bundle without a GPU (`make test-gpu-bundle`): unpacked in a pristine Debian 11 minbase root (glibc
# 2.31, older than the build machine's; tests/fresh/root.sh with FRESH_SUITE=bullseye), where neither MPI,
# HDF5, Boost, oneDNN, Python nor any CUDA library is installed, the bundle
#   1. trains fmnist_cnn with --device cpu, started from another directory through bin/cnntrain (one process:
#      Open MPI's singleton start forks the orted wrapper);
#   2. does the same on 2 ranks through its own bin/mpirun -np 2 (its relocated Open MPI);
#   3. inspects data with bin/cnntrain-data;
#   4. answers --device cuda with an error naming what is missing (exit 1 or 2), not a crash; with this
#      machine's cuDNN, cuBLASLt and NCCL put under the root's /usr/local/cuda/lib64 the plugin loads them
#      through the bundle's glibc (Debian 11's is older), and only the missing driver stops it;
#   5. has run-gpu-checks.sh stop with "no GPU" (exit 3) and still write report.json;
#   6. under a stand-in nvidia-smi (fake_nvidia_smi.sh): driver 535 stops within a minute naming 535 (exit 4);
#      driver 580 runs every check (failing here, except the CPU run; the sanitizer checks with the bundle's
#      compute-sanitizer), exits 1 within minutes, and writes a
#      complete report.json (checked with check_report.py outside the root: the root has no Python; a gtest
#      binary that cannot start there, for want of cuDNN, is one failed check instead of one per case).
#   test_bundle.sh BUNDLE.tar.gz          (BUNDLE_SUITES="bullseye bookworm" runs it in each root in turn)
set -euo pipefail
bundle=$(readlink -f "$1")
src=$(cd "$(dirname "$0")" && pwd)
root_sh=$src/../fresh/root.sh
fail() { echo "test_bundle.sh: FAILED: $*" >&2; exit 1; }
export FRESH_ENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"

# in_suite SUITE: every check above in a fresh root of SUITE.
in_suite() {
  export FRESH_SUITE=$1 FRESH_ROOT=${FRESH_DIR:-build/fresh}/root-bundle-$1
  bash "$root_sh" build
  root=$(bash "$root_sh" path)
  trap 'bash "$root_sh" cleanup >/dev/null 2>&1 || true' EXIT
  tar -C "$root/opt" -xzf "$bundle"
  in_root() { bash "$root_sh" run --cwd /tmp "$@"; }
  echo "test_bundle.sh: in $(in_root cat /etc/debian_version) ($(in_root getconf GNU_LIBC_VERSION)), bundle's glibc" \
    "$(cat "$root/opt/cnntrain-gpu/GLIBC")"

  # Nothing of the project's own dependencies is installed in the root.
  local pkg
  for pkg in openmpi-bin libopenmpi3 libhdf5-openmpi-103-1 libboost-program-options1.74.0 libdnnl2 liblmdb0 python3; do
    [[ $(in_root dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) != *'install ok'* ]] ||
      fail "$pkg is installed in the root"
  done
  [[ ! -e $root/usr/local/cuda ]] || fail "the root has /usr/local/cuda"

  local args=(--config /opt/cnntrain-gpu/jobs/fashion_mnist.ini --data.train /opt/cnntrain-gpu/data/fmnist_8k.h5
              --data.test "" --train.max_steps 30 --train.batch 32 --log.every_steps 10 --checkpoint.at_end false)
  in_root /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cpu --run-dir /tmp/run1 >"$root/tmp/run1.log" 2>&1 ||
    { cat "$root/tmp/run1.log"; fail "bin/cnntrain --device cpu"; }
  grep -q '"event":"end","status":"completed"' "$root/tmp/run1/metrics.jsonl" || fail "run1 did not complete"
  echo "ok: bin/cnntrain --device cpu trains ($(grep -c '"event":"train"' "$root/tmp/run1/metrics.jsonl") train events)"

  in_root /opt/cnntrain-gpu/bin/mpirun --oversubscribe -np 2 /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cpu \
    --run-dir /tmp/run2 >"$root/tmp/run2.log" 2>&1 || { cat "$root/tmp/run2.log"; fail "bin/mpirun -np 2 bin/cnntrain"; }
  grep -q '"world_size":2' "$root/tmp/run2/metrics.jsonl" || fail "run2 did not run 2 ranks"
  grep -q '"event":"end","status":"completed"' "$root/tmp/run2/metrics.jsonl" || fail "run2 did not complete"
  echo "ok: bin/mpirun -np 2 bin/cnntrain trains with the bundle's Open MPI"

  [[ $(in_root /opt/cnntrain-gpu/bin/cnntrain-data inspect /opt/cnntrain-gpu/data/fmnist_8k.h5) == *8192* ]] ||
    fail "bin/cnntrain-data inspect"
  echo "ok: bin/cnntrain-data inspect"

  local rc=0 out
  out=$(in_root /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cuda --run-dir /tmp/run3 2>&1) || rc=$?
  [[ ($rc == 1 || $rc == 2) && $out == *"--device cuda"* && $out == *"error"* ]] ||
    fail "--device cuda without CUDA libraries or GPU: exit $rc: $out"
  [[ $out != *"libcnntrain-cuda.so: not found"* ]] || fail "the plugin was not found: $out"
  echo "ok: --device cuda without a GPU: exit $rc: $(head -c 300 <<<"${out#*error: }")"

  # The machine's NVIDIA libraries (cuDNN, cuBLASLt, NCCL under /usr/local/cuda/lib64, as env.sh finds them;
  # hard links: no copies of a gigabyte) load through the bundle's glibc: the plugin loads, and only the
  # missing driver (libcuda.so.1) stops --device cuda.
  local lib linked=1
  mkdir -p "$root/usr/local/cuda/lib64"
  for lib in libcudnn.so.9 libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
    [[ -e /usr/local/cuda/lib64/$lib ]] || continue
    ln "$(readlink -f "/usr/local/cuda/lib64/$lib")" "$root/usr/local/cuda/lib64/$lib" 2>/dev/null || linked=0
  done
  if ((linked)); then
    rc=0
    out=$(in_root /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cuda --run-dir /tmp/run4 2>&1) || rc=$?
    [[ $rc == 1 && $out == *"no usable GPU"* ]] || fail "--device cuda with the CUDA libraries but no driver: exit $rc: $out"
    echo "ok: with /usr/local/cuda/lib64's cuDNN, cuBLASLt, NCCL: the plugin loads; exit 1: ${out#*error: }"
  else
    echo "note: /usr/local/cuda is on another file system than the root: the vendor-library load is not checked"
  fi
  rm -rf "$root/usr/local/cuda"

  rc=0
  out=$(in_root /opt/cnntrain-gpu/run-gpu-checks.sh /tmp/nogpu 2>&1) || rc=$?
  [[ $rc == 3 && $out == *"no GPU"* && -s $root/tmp/nogpu/report.json ]] ||
    fail "run-gpu-checks.sh without a GPU: exit $rc: $out"
  echo "ok: run-gpu-checks.sh without a GPU: exit 3, report.json written"

  install -m 755 "$src/fake_nvidia_smi.sh" "$root/usr/local/bin/nvidia-smi"
  local t0=$SECONDS
  rc=0
  FRESH_ENV="$FRESH_ENV FAKE_DRIVER=535.129.03" in_root timeout 60 /opt/cnntrain-gpu/run-gpu-checks.sh /tmp/d535 \
    >"$root/tmp/d535.log" 2>&1 || rc=$?
  [[ $rc == 4 ]] && grep -q "driver 535.129.03 is older" "$root/tmp/d535.log" ||
    { cat "$root/tmp/d535.log"; fail "driver 535: exit $rc, expected 4 naming 535"; }
  echo "ok: run-gpu-checks.sh, driver 535: exit 4 in $((SECONDS - t0)) s naming 535"

  t0=$SECONDS rc=0
  in_root timeout 600 /opt/cnntrain-gpu/run-gpu-checks.sh /tmp/d580 >"$root/tmp/d580.log" 2>&1 || rc=$?
  [[ $rc == 1 ]] || { tail -n 30 "$root/tmp/d580.log"; fail "driver 580: exit $rc, expected 1"; }
  python3 "$src/check_report.py" "$root/tmp/d580/report.json" gpu=pass driver=pass gpu-info 'backend-sweep*=fail' \
    'cuda-tests*=fail' sanitizer-memcheck=fail fmnist-cpu-det=pass fmnist-cuda-vs-cpu=fail fmnist-fp16-custom \
    'vendor-speed*=fail' resnet50-cudnn-fp16-tf32true-256=fail pytorch-resnet50-fp16-256=skip 'nccl*=fail' ||
    fail "driver 580: report.json"
  # Debian 11's glibc 2.31 is older than the bundle's: the programs ran on the bundle's glibc and libstdc++
  # there; Debian 12's is the bundle's own version: the machine's.
  local whose="the bundle's"
  [[ $FRESH_SUITE == bullseye ]] || whose="the machine's"
  grep -q "runtime: glibc: $whose, libstdc++: $whose" "$root/tmp/d580/report.txt" ||
    fail "runtime choice in a Debian 11 root: $(grep runtime: "$root/tmp/d580/report.txt")"
  grep -q "compute_sanitizer: /opt/cnntrain-gpu/compute-sanitizer/compute-sanitizer" "$root/tmp/d580/report.txt" ||
    fail "driver 580: the bundle's compute-sanitizer was not used"
  echo "ok: run-gpu-checks.sh, driver 580: every check ran, exit 1 in $((SECONDS - t0)) s"
  bash "$root_sh" cleanup
  trap - EXIT
  echo "test_bundle.sh: the bundle works in a bare $1 root without a GPU"
}

for suite in ${BUNDLE_SUITES:-bullseye}; do in_suite "$suite"; done
