#!/usr/bin/env bash
# Assembles the self-contained GPU bundle (`make gpu-bundle`; docs/gpu.md): build/cnntrain-gpu.tar.gz, which
# unpacks to cnntrain-gpu/ holding the trainer, cnntrain-data, the GPU test binaries, the CUDA plugin, every
# shared library they and Open MPI need except the NVIDIA ones (driver, cuDNN, cuBLAS, NCCL: the GPU machine's),
# this machine's own dynamic loader, glibc and C++ runtime (programs start through them on a machine whose own
# are older: the bundle runs on an older glibc than the one it was built with), Open MPI's plugins and data
# relocated through OPAL_PREFIX, the CUDA toolkit version it was built with and the driver that needs, NVIDIA's
# compute-sanitizer of that toolkit, a kernel tracer with the toolkit's CUPTI, a small Fashion-MNIST subset, and
# run-gpu-checks.sh.
#   make_bundle.sh BUILD_DIR OUT.tar.gz   (NVCC: the CUDA build's compiler, default nvcc; BUNDLE_SANITIZER=0: no
#                                          compute-sanitizer)
set -euo pipefail
build=$1 out=$2
src=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$src/../.." && pwd)
work=$build/bundle
stage=$work/cnntrain-gpu
rm -rf "$work"
mkdir -p "$stage"/{bin,libexec/elf,lib/ld,lib/ld-host,etc,share,data,jobs}

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

# The programs themselves go to libexec/elf; each is started by a wrapper of the same name (bin/ for the user's
# programs, libexec/ for those Open MPI or run-gpu-checks.sh start), never directly: see the loader below.
install -m 755 "$build/cnntrain" "$build/cnntrain-data" "$build/tests/cuda_tests" "$build/tests/backend_tests" \
  "$stage/libexec/elf/"
install -m 755 "$orterun" "$stage/libexec/elf/mpirun"
[[ -x $(dirname "$orterun")/orted ]] && install -m 755 "$(dirname "$orterun")/orted" "$stage/libexec/elf/"
# The plugin beside the loader: cnntrain looks for it beside /proc/self/exe, which is the loader (lib/).
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

# glibc, whole, in lib/glibc: its loader, which the wrappers run explicitly (`ld-linux-x86-64.so.2 --library-path
# ... PROGRAM`) on a machine whose glibc is older than this one, and all of glibc's libraries, also those no
# bundled program needs: a library of the machine's that a program dlopens (libcuda.so.1, pip's cuDNN) may need
# libdl or librt, and those must be the bundle's (glibc's libraries only work with their own libc). On a machine
# with this glibc or a newer one the wrappers take the machine's loader and glibc instead (env.sh): its own
# libraries (a system NCCL or PMIx plugin built for glibc 2.38, say) would fail on the bundle's older one.
# Patching the programs' ELF interpreter instead (patchelf) would need an absolute path, fixed at build time or
# rewritten after unpacking; the explicit loader works from wherever the bundle is unpacked.
libc_dir=$(dirname "$(ldd "$build/cnntrain" | awk '$1 == "libc.so.6" { print $3 }')")
[[ -f $libc_dir/libc.so.6 && -f $libc_dir/ld-linux-x86-64.so.2 ]] ||
  die "cannot find this machine's glibc (libc.so.6 and ld-linux-x86-64.so.2 beside it) through ldd $build/cnntrain"
# (Captured, not piped into grep -q: under pipefail the loader's later writes to a grep that has exited at its
# match die of SIGPIPE, and the check failed at random on a machine that has --argv0.)
ld_help=$("$libc_dir/ld-linux-x86-64.so.2" --help 2>/dev/null) || true
[[ $ld_help == *--argv0* ]] ||
  die "$libc_dir/ld-linux-x86-64.so.2 has no --argv0 (glibc < 2.33): build the bundle on Debian 12 or newer"
mkdir -p "$stage/lib/glibc" "$stage/lib/cxx"
for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 \
    libresolv.so.2 libanl.so.1 libnss_files.so.2 libnss_dns.so.2 libnss_compat.so.2 libthread_db.so.1 \
    libc_malloc_debug.so.0 libBrokenLocale.so.1; do
  [[ -e $libc_dir/$lib ]] && cp -L "$libc_dir/$lib" "$stage/lib/glibc/$lib"
done
glibc=$(ldd --version | awk 'NR == 1 { print $NF }')
echo "$glibc" >"$stage/GLIBC"

# The kernel tracer of the speed checks (kernel_trace.c; docs/gpu.md): built against this toolkit's CUPTI, which
# travels beside it in lib/ (found there through its RUNPATH, $ORIGIN). Without CUPTI the bundle has no tracer
# and that check skips, saying so.
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v "${NVCC:-nvcc}")")")")
cupti_h="" cupti_so=""
for d in "$cuda_home/include" "$cuda_home/extras/CUPTI/include"; do
  [[ -z $cupti_h && -f $d/cupti.h ]] && cupti_h=$d/cupti.h
done
for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/extras/CUPTI/lib64"; do
  for f in "$d"/libcupti.so.[0-9]*; do [[ -z $cupti_so && -f $f ]] && cupti_so=$f; done
done
if [[ -n $cupti_h && -n $cupti_so ]]; then
  cp -L "$cupti_so" "$stage/lib/"
  # shellcheck disable=SC2016  # $ORIGIN is for the loader, not the shell
  gcc -std=c11 -O2 -Wall -shared -fPIC -I"$(dirname "$cupti_h")" -o "$stage/lib/libcnntrain-ktrace.so" \
    "$src/kernel_trace.c" -L"$stage/lib" -l:"${cupti_so##*/}" -Wl,--enable-new-dtags,-rpath,'$ORIGIN' ||
    die "building the kernel tracer (kernel_trace.c) against $cupti_so failed"
else
  echo "make_bundle.sh: warning: no CUPTI (cupti.h, libcupti.so) under $cuda_home: the bundle has no kernel tracer" >&2
fi

# Every other shared library the binaries and plugins load, except the NVIDIA ones.
skip='^(linux-vdso|libcuda|libcudnn|libcublas|libcudart|libnccl|libnvidia|libnvrtc|libnvJitLink|libnvblas)'
copy_deps() {
  local f dep path changed=1
  while ((changed)); do
    changed=0
    while IFS= read -r -d '' f; do
      while read -r dep path; do
        [[ $dep =~ $skip ]] && continue
        [[ $path == "not" ]] && die "$f needs $dep, which is not installed here"
        [[ -e $stage/lib/$dep || -e $stage/lib/glibc/$dep || -e $stage/lib/cxx/$dep ]] && continue
        cp -L "$path" "$stage/lib/$dep"
        changed=1
      done < <(ldd "$f" 2>/dev/null | awk '/=>/ { print $1, $3 }')
    done < <(find "$stage/libexec" "$stage/lib" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
  done
}
copy_deps
# The C++ runtime in lib/cxx, taken only where the machine's is older (env.sh): a machine library (NCCL, cuDNN)
# may need the newer one of the machine.
for lib in libstdc++.so.6 libgcc_s.so.1; do
  [[ -e $stage/lib/$lib ]] && mv "$stage/lib/$lib" "$stage/lib/cxx/$lib"
done
[[ -e $stage/lib/cxx/libstdc++.so.6 ]] || die "libstdc++.so.6 was not among the programs' libraries"
strip --strip-debug "$stage"/libexec/elf/* "$stage"/lib/*.so* "$stage"/lib/cxx/*.so* 2>/dev/null || true
# A library with a DT_RPATH to the build machine's directories would take its dependencies from the machine's
# older libraries before the loader's --library-path (DT_RUNPATH comes after it and is harmless).
for f in "$stage"/libexec/elf/* "$stage"/lib/*.so* "$stage"/lib/cxx/*.so*; do
  dynamic=$(readelf -d "$f" 2>/dev/null) || true
  [[ $dynamic != *'(RPATH)'* ]] || die "$f has a DT_RPATH, searched before the bundle's libraries"
done

# The CUDA toolkit the plugin was built with (its runtime is linked in statically) and the oldest driver that
# runtime accepts (NVIDIA's CUDA release notes, "minor version compatibility": 12.x needs >= 525, 13.x >= 580).
cuda_version=$("${NVCC:-nvcc}" --version | sed -n 's/.*release [0-9.]*, V\([0-9.]*\).*/\1/p')
case ${cuda_version%%.*} in
  12) driver_min=525 ;;
  13) driver_min=580 ;;
  *) die "CUDA toolkit '${cuda_version:-unknown}' (${NVCC:-nvcc} --version): which driver it needs is not known here" ;;
esac
echo "$cuda_version" >"$stage/CUDA_VERSION"
echo "$driver_min" >"$stage/CUDA_DRIVER_MIN"

# compute-sanitizer: a GPU machine has the driver and pip's NVIDIA libraries, rarely the toolkit's tools. NVIDIA's
# wheel of this toolkit's release (nvidia-cuda-sanitizer-api), fetched from PyPI once into BUILD; its manual
# pages and 32-bit parts left out. BUNDLE_SANITIZER=0 builds without it (the sanitizer checks then skip).
if [[ ${BUNDLE_SANITIZER:-1} == 1 ]]; then
  cuda_mm=$(cut -d. -f1-2 <<<"$cuda_version")
  san=$build/sanitizer-$cuda_mm
  if [[ ! -x $san/compute-sanitizer/compute-sanitizer ]]; then
    rm -rf "$san"
    mkdir -p "$san"
    /usr/bin/python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$san" \
      "nvidia-cuda-sanitizer-api==$cuda_mm.*" ||
      die "pip download nvidia-cuda-sanitizer-api==$cuda_mm.* failed (needs PyPI once, and python3-pip);" \
        "BUNDLE_SANITIZER=0 builds the bundle without compute-sanitizer"
    /usr/bin/python3 - "$san" <<'PY'
# The directory of the compute-sanitizer executable (nvidia/cu13/bin in 13.0's wheel, nvidia/cu13/compute-sanitizer
# in later ones), whole but for manuals, headers and 32-bit parts.
import glob, os, sys, zipfile
dst = os.path.join(sys.argv[1], "compute-sanitizer")
with zipfile.ZipFile(glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]) as z:
    exe = next(m.filename for m in z.infolist() if m.filename.endswith("/compute-sanitizer"))
    top = exe.rsplit("/", 1)[0] + "/"
    for m in z.infolist():
        rel = m.filename[len(top):].split("/")
        if not m.filename.startswith(top) or m.is_dir() or rel[0] in ("docs", "x86", "include"):
            continue
        out = os.path.join(dst, *rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(z.read(m))
        os.chmod(out, 0o755 if (m.external_attr >> 16) & 0o100 else 0o644)
PY
  fi
  [[ -x $san/compute-sanitizer/compute-sanitizer ]] || die "no compute-sanitizer in $san's wheel"
  cp -a "$san/compute-sanitizer" "$stage/"
fi

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
install -m 644 "$src"/{env,checks_lib,checks_fmnist,checks_runs,checks_perf}.sh "$stage/libexec/"
install -m 755 "$src/run-gpu-checks.sh" "$stage/run-gpu-checks.sh"
install -m 644 "$repo/tests/bench/torch_resnet50.py" "$stage/libexec/"
install -m 755 "$src/kernel_time.sh" "$stage/libexec/"
# One wrapper per program, and one name for each loader per program (a symbolic link): the process then shows
# as cnntrain, not ld-linux-x86-64, in ps and nvidia-smi. lib/ld: the bundle's loader; lib/ld-host: the machine's
# at the path the x86-64 ABI fixes.
for f in "$stage"/libexec/elf/*; do
  tool=${f##*/} dir=$stage/libexec
  [[ $tool == cnntrain || $tool == cnntrain-data || $tool == mpirun ]] && dir=$stage/bin
  sed "s/@TOOL@/$tool/g" "$src/wrapper.sh" >"$dir/$tool"
  chmod 755 "$dir/$tool"
  ln -s ../glibc/ld-linux-x86-64.so.2 "$stage/lib/ld/$tool"
  ln -s /lib64/ld-linux-x86-64.so.2 "$stage/lib/ld-host/$tool"
done
git -C "$repo" describe --always --dirty >"$stage/VERSION" 2>/dev/null || echo unknown >"$stage/VERSION"

tar -C "$work" --owner=0 --group=0 -czf "$out.tmp" cnntrain-gpu
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
echo "make_bundle.sh: $out: $((size / 1048576)) MiB ($(find "$stage" -type f | wc -l) files, glibc $glibc carried," \
  "CUDA $cuda_version, driver >= $driver_min)"
((size <= 60 * 1048576)) || die "$out is over the 60 MiB limit"
