#!/usr/bin/env bash
# cnntrain --gpu-info, the GPU preflight, on this GPU-less machine: it prints the CUDA runtime and each vendor
# library's version and path, names the missing driver with the version it needs and exits 1, within seconds;
# a (fake) nvidia-smi reporting driver 535 is named with the ways out; --device cuda stops with the same
# verdict. Where mount namespaces are allowed (root), the NVIDIA libraries are hidden: the plugin still loads
# (no load-time dependency on them) and reports each one missing with the places it searched, and a cuDNN built
# for CUDA 12 (a fake, $BUILD/tests/vendor_fakes) is refused by name.
source "$(dirname "$0")/lib.bash"

if nvidia-smi -L >/dev/null 2>&1; then
  echo "skip: a GPU is present (its --gpu-info runs in the GPU bundle's checks)"
  exit 0
fi
if [ ! -f "$BUILD/libcnntrain-cuda.so" ]; then
  expect_exit 1 "cannot load the CUDA backend" -- "$BUILD/cnntrain" --gpu-info
  exit 0
fi

# expect_info NEEDLE...: the last --gpu-info output ($out) mentions every NEEDLE.
expect_info() {
  for needle; do grep -qF -- "$needle" <<<"$out" || fail "--gpu-info does not mention '$needle':\n$out"; done
}
gpu_info() {  # gpu_info [env assignments...]: runs --gpu-info, sets $out and $rc, fails past 20 s
  local start=$SECONDS
  rc=0
  out=$(env "$@" timeout 60 "$BUILD/cnntrain" --gpu-info 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "--gpu-info without a GPU: exit $rc (want 1):\n$out"
  ((SECONDS - start <= 20)) || fail "--gpu-info took $((SECONDS - start)) s"
}

gpu_info
expect_info "nvidia-smi driver_version: not found" "CUDA runtime: 13." "cuDNN: cuDNN 9." "cuBLASLt: cuBLASLt 13." \
  "NCCL: NCCL 2." "NOT USABLE: no NVIDIA driver" "needs driver >= 580"
echo "ok: --gpu-info without a driver: exit 1, $(grep -m1 'cuDNN:' <<<"$out")"

mkdir -p "$E2E_TMP/bin"
printf '#!/bin/sh\necho 535.104.05\n' >"$E2E_TMP/bin/nvidia-smi"
chmod +x "$E2E_TMP/bin/nvidia-smi"
gpu_info PATH="$E2E_TMP/bin:$PATH"
expect_info "nvidia-smi driver_version: 535.104.05" "driver 535.104.05 supports CUDA 12 at most" \
  "needs driver >= 580" "cuda-compat-13-0"
echo "ok: --gpu-info with nvidia-smi reporting 535: names 535, needs >= 580, the ways out"

expect_exit 1 "no usable GPU: no NVIDIA driver" -- "$BUILD/cnntrain" --device cuda --data.synthetic 256x8x8x1:2 \
  --run-dir "$E2E_TMP/cuda"

if ! unshare -m true 2>/dev/null; then
  echo "skip: no mount namespaces here (not root): the hidden-library checks need them"
  exit 0
fi
# Every directory holding the real libraries, covered by an empty one in a private mount namespace.
hide=$(for so in libcudnn.so.9 libcublasLt.so.13 libnccl.so.2; do
         ldconfig -p | awk -v so="$so" '$1 == so { print $NF }'
         [ -e /usr/local/cuda/lib64/$so ] && readlink -f /usr/local/cuda/lib64/$so
       done | xargs -r -n1 dirname | sort -u)
mkdir -p "$E2E_TMP/empty"
hidden() {  # hidden COMMAND...: runs it with the NVIDIA library directories empty
  unshare -m bash -c 'for d in $1; do mount --bind "$2" "$d"; done; shift 2; "$@"' _ "$hide" "$E2E_TMP/empty" "$@"
}
rc=0
out=$(hidden timeout 60 "$BUILD/cnntrain" --gpu-info 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "--gpu-info with the libraries hidden: exit $rc (want 1):\n$out"
expect_info "CUDA runtime: 13." "cuDNN: cuDNN 9 for CUDA 13 (libcudnn.so.9) not found. Tried:" \
  "/usr/local/cuda/lib64 (the CUDA toolkit): no libcudnn.so.9" "pip install nvidia-cudnn-cu13" \
  "NCCL: NCCL 2 for CUDA 13 (libnccl.so.2) not found" "pip install nvidia-cublas"
echo "ok: the plugin loads without cuDNN/cuBLASLt/NCCL and names each one missing with the places searched"

fake=$(cd "$BUILD/tests/vendor_fakes/cudnn9-cuda12" && pwd)
out=$(hidden env CNNTRAIN_CUDA_LIBS="$fake" timeout 60 "$BUILD/cnntrain" --gpu-info 2>&1) || true
expect_info "refused $fake/libcudnn.so.9: it is cuDNN 9.1.0 built for CUDA 12.4; this build's CUDA runtime is 13.0"
echo "ok: a cuDNN built for CUDA 12 is refused by name"
