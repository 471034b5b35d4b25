#!/usr/bin/env bash
# The GPU bundle without a GPU (`make test-gpu-bundle`): unpacked in a pristine Debian 12 minbase root
# (tests/fresh/root.sh, the root of `make test-fresh`), where neither MPI, HDF5, Boost, oneDNN nor any CUDA
# library is installed, the bundle
#   1. trains fmnist_cnn with --device cpu, started from another directory through bin/cnntrain;
#   2. does the same through its own bin/mpirun -np 2 (its relocated Open MPI);
#   3. converts data with bin/cnntrain-data;
#   4. answers --device cuda with the plugin's library error (no CUDA libraries there), not a crash;
#   5. has run-gpu-checks.sh stop with a "no GPU" message and a non-zero exit.
#   test_bundle.sh BUNDLE.tar.gz
set -euo pipefail
bundle=$(readlink -f "$1")
root_sh=${FRESH_ROOT_SH:-tests/fresh/root.sh}
[[ -f $root_sh ]] || { echo "test_bundle.sh: $root_sh (the minimal Debian root of make test-fresh) is missing" >&2; exit 1; }
fail() { echo "test_bundle.sh: FAILED: $*" >&2; exit 1; }
export FRESH_ENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
bash "$root_sh" build
root=$(bash "$root_sh" path)
trap 'bash "$root_sh" cleanup >/dev/null 2>&1 || true' EXIT
tar -C "$root/opt" -xzf "$bundle"
in_root() { bash "$root_sh" run --cwd /tmp "$@"; }

# Nothing of the project's own dependencies is installed in the root.
for pkg in openmpi-bin libopenmpi3 libhdf5-openmpi-103-1 libboost-program-options1.74.0 libdnnl2 liblmdb0; do
  ! in_root dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok' || fail "$pkg is installed in the root"
done
[[ ! -e $root/usr/local/cuda ]] || fail "the root has /usr/local/cuda"

args=(--config /opt/cnntrain-gpu/jobs/fashion_mnist.ini --data.train /opt/cnntrain-gpu/data/fmnist_8k.h5
      --data.test "" --train.max_steps 30 --train.batch 32 --log.every_steps 10 --checkpoint.at_end false)
in_root /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cpu --run-dir /tmp/run1 > "$root/tmp/run1.log" 2>&1 ||
  { cat "$root/tmp/run1.log"; fail "bin/cnntrain --device cpu"; }
grep -q '"event":"end","status":"completed"' "$root/tmp/run1/metrics.jsonl" || fail "run1 did not complete"
echo "ok: bin/cnntrain --device cpu trains in the bare root ($(grep -c '"event":"train"' "$root/tmp/run1/metrics.jsonl") train events)"

in_root /opt/cnntrain-gpu/bin/mpirun --oversubscribe -np 2 /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cpu \
  --run-dir /tmp/run2 > "$root/tmp/run2.log" 2>&1 || { cat "$root/tmp/run2.log"; fail "bin/mpirun -np 2 bin/cnntrain"; }
grep -q '"world_size":2' "$root/tmp/run2/metrics.jsonl" || fail "run2 did not run 2 ranks"
grep -q '"event":"end","status":"completed"' "$root/tmp/run2/metrics.jsonl" || fail "run2 did not complete"
echo "ok: bin/mpirun -np 2 bin/cnntrain trains with the bundle's Open MPI"

in_root /opt/cnntrain-gpu/bin/cnntrain-data inspect /opt/cnntrain-gpu/data/fmnist_8k.h5 | grep -q 8192 ||
  fail "bin/cnntrain-data inspect"
echo "ok: bin/cnntrain-data inspect"

rc=0
out=$(in_root /opt/cnntrain-gpu/bin/cnntrain "${args[@]}" --device cuda --run-dir /tmp/run3 2>&1) || rc=$?
[[ $rc == 1 && $out == *"cannot load the CUDA backend"* && $out == *libcudnn* ]] ||
  fail "--device cuda without CUDA libraries: exit $rc: $out"
echo "ok: --device cuda without CUDA libraries: exit 1, ${out#*error: }" | head -2

rc=0
out=$(in_root /opt/cnntrain-gpu/run-gpu-checks.sh /tmp/report.txt 2>&1) || rc=$?
[[ $rc != 0 && $out == *"no GPU"* ]] || fail "run-gpu-checks.sh without a GPU: exit $rc: $out"
echo "ok: run-gpu-checks.sh without a GPU: exit $rc: ${out##*$'\n'}"
echo "test_bundle.sh: the bundle works in a bare Debian 12 root without a GPU"
