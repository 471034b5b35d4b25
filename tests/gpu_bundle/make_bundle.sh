#!/usr/bin/env bash
# Assembles the self-contained GPU bundle (`make gpu-bundle`; docs/gpu.md): build/cnntrain-gpu.tar.gz, which
# unpacks to cnntrain-gpu/ holding the trainer, cnntrain-data, the GPU test binary, the CUDA plugin, every
# shared library they and Open MPI need except glibc and the NVIDIA libraries (driver, CUDA runtime, cuDNN,
# cuBLAS, NCCL: the GPU machine's), Open MPI's plugins and data relocated through OPAL_PREFIX, a small
# Fashion-MNIST subset, and run-gpu-checks.sh.
#   make_bundle.sh BUILD_DIR OUT.tar.gz
set -euo pipefail
build=$1 out=$2
src=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$src/../.." && pwd)
work=$build/bundle
stage=$work/cnntrain-gpu
rm -rf "$work"
mkdir -p "$stage"/{bin,libexec,lib,etc,share,data,jobs}

die() { echo "make_bundle.sh: $*" >&2; exit 1; }
[[ -f $build/libcnntrain-cuda.so && -f $build/tests/cuda_tests && -f $build/tests/backend_tests ]] ||
  die "$build/libcnntrain-cuda.so or the GPU test binary is missing: the bundle needs a CUDA build (nvcc, USE_CUDA=1)"

# Open MPI's own directories, read from its configuration (Debian: /usr/lib/x86_64-linux-gnu/openmpi/...).
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1:\(.*\)$/\1/p"; }
ompi_prefix=$(ompi_path prefix)
ompi_pkglibdir=$(ompi_path pkglibdir)
ompi_pkgdatadir=$(ompi_path pkgdatadir)
ompi_sysconfdir=$(ompi_path sysconfdir)
[[ -d $ompi_pkglibdir ]] || die "cannot find Open MPI's plugin directory (ompi_info --path pkglibdir)"
rel() { echo "${1#"$ompi_prefix"/}"; }
orterun=$(readlink -f "$(command -v mpirun)")

install -m 755 "$build/cnntrain" "$build/cnntrain-data" "$build/tests/cuda_tests" "$build/tests/backend_tests" \
  "$stage/libexec/"
install -m 755 "$orterun" "$stage/libexec/mpirun"
[[ -x $(dirname "$orterun")/orted ]] && install -m 755 "$(dirname "$orterun")/orted" "$stage/libexec/"
install -m 644 "$build/libcnntrain-cuda.so" "$stage/lib/"
mkdir -p "$stage/$(rel "$ompi_pkglibdir")" "$stage/share/openmpi" "$stage/etc/openmpi"
cp -a "$ompi_pkglibdir"/. "$stage/$(rel "$ompi_pkglibdir")/"
cp -a "$ompi_pkgdatadir"/. "$stage/share/openmpi/"
cp -a "$ompi_sysconfdir"/. "$stage/etc/openmpi/"
# PMIx (Open MPI 4's process-management layer) has plugins of its own.
pmix_dir=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix.so.2 /{print $NF; exit}')")" 2>/dev/null || true)
if [[ -n $pmix_dir && -d $pmix_dir/pmix ]]; then
  mkdir -p "$stage/lib/pmix" "$stage/share/pmix"
  cp -a "$pmix_dir/pmix"/. "$stage/lib/pmix/"
  [[ -d $pmix_dir/../share/pmix ]] && cp -a "$pmix_dir/../share/pmix"/. "$stage/share/pmix/"
fi
cat >>"$stage/etc/openmpi/openmpi-mca-params.conf" <<'CONF'

# cnntrain GPU bundle: shared memory and TCP only (the bundle's Open MPI is for one node; a cluster's own MPI
# build, with its fabric, is the way to run across nodes); no single-copy mechanism, which containers and
# chroots often forbid.
btl = self,vader,tcp
pml = ob1
btl_vader_single_copy_mechanism = none
CONF
# Transports the bundle leaves out: their libraries (UCX, libfabric, verbs, PSM) are the fabric's and large.
find "$stage/$(rel "$ompi_pkglibdir")" \( -name '*ucx*' -o -name '*ofi*' -o -name '*openib*' -o -name '*psm*' \
  -o -name '*verbs*' -o -name '*portals*' -o -name '*cuda*' \) -delete

# Every shared library the binaries and plugins load, except glibc's and the NVIDIA ones.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so|libanl|libnsl|libcuda|libcudnn|libcublas|libcudart|libnccl|libnvidia|libnvrtc|libnvJitLink|libnvblas)'
copy_deps() {
  local f dep path changed=1
  while ((changed)); do
    changed=0
    while IFS= read -r -d '' f; do
      while read -r dep path; do
        [[ $dep =~ $skip ]] && continue
        [[ $path == "not" ]] && die "$f needs $dep, which is not installed here"
        [[ -e $stage/lib/$dep ]] && continue
        cp -L "$path" "$stage/lib/$dep"
        changed=1
      done < <(ldd "$f" 2>/dev/null | awk '/=>/ { print $1, $3 }')
    done < <(find "$stage/libexec" "$stage/lib" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
  done
}
copy_deps
strip --strip-debug "$stage"/libexec/* "$stage"/lib/*.so* 2>/dev/null || true

# A small dataset for the checks that train: the first 8192 Fashion-MNIST training images.
[[ -f $repo/data/fashion_mnist/train.h5 ]] || die "data/fashion_mnist/train.h5 is missing (make data)"
/usr/bin/python3 - "$repo/data/fashion_mnist/train.h5" "$stage/data/fmnist_8k.h5" <<'PY'
import sys, h5py
src, dst = sys.argv[1:]
with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
    g.create_dataset("images", data=f["images"][:8192], chunks=(64,) + f["images"].shape[1:])
    g.create_dataset("labels", data=f["labels"][:8192])
    for k, v in f.attrs.items():
        g.attrs[k] = v
PY
cp "$repo/jobs/fashion_mnist.ini" "$stage/jobs/"
install -m 755 "$src/env.sh" "$stage/libexec/env.sh"
install -m 755 "$src/run-gpu-checks.sh" "$stage/run-gpu-checks.sh"
install -m 644 "$repo/tests/bench/torch_resnet50.py" "$stage/libexec/"
for tool in cnntrain cnntrain-data mpirun; do
  sed "s/@TOOL@/$tool/" "$src/wrapper.sh" >"$stage/bin/$tool"
  chmod 755 "$stage/bin/$tool"
done
git -C "$repo" describe --always --dirty >"$stage/VERSION" 2>/dev/null || echo unknown >"$stage/VERSION"
glibc=$(ldd --version | awk 'NR == 1 { print $NF }')
echo "$glibc" >"$stage/GLIBC_MIN"

tar -C "$work" --owner=0 --group=0 -czf "$out.tmp" cnntrain-gpu
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
echo "make_bundle.sh: $out: $((size / 1048576)) MiB ($(find "$stage" -type f | wc -l) files, glibc >= $glibc)"
((size <= 60 * 1048576)) || die "$out is over the 60 MiB limit"
