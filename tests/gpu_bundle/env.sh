# shellcheck shell=sh disable=SC2034  # CNNTRAIN_LIBRARY_PATH: for the wrapper that sources this
# Sourced by the bundle's wrappers (wrapper.sh) with CNNTRAIN_BUNDLE set to the bundle's root. Sets
# CNNTRAIN_LIBRARY_PATH, the search path the wrappers give the bundle's loader: the bundle's libraries, the caller's LD_LIBRARY_PATH
# (e.g. NVIDIA's forward-compatibility libcuda), the machine's NVIDIA libraries (cuDNN, cuBLASLt, NCCL, which
# may live under /usr/local/cuda or only inside Python site-packages as pip's nvidia-* wheels:
# site-packages/nvidia/<name>/lib), and the driver's directory (where libcuda.so.1 is). Nothing here is exported
# as LD_LIBRARY_PATH: the machine's programs (python3, nvidia-smi) must never load the bundle's glibc or
# libstdc++. Also relocates Open MPI to the bundle.
cnn_site_packages() {
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c 'import site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
print("\n".join(d for d in dirs if d))' 2>/dev/null
  done
  for d in "${VIRTUAL_ENV:-}" "${CONDA_PREFIX:-}"; do
    [ -n "$d" ] && ls -d "$d"/lib/python3*/site-packages 2>/dev/null
  done
  ls -d /usr/lib/python3/dist-packages /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
    "$HOME"/.local/lib/python3*/site-packages 2>/dev/null
}
# Directories holding libcudnn*, libcublasLt*, libnccl* or libcudart*, one per line, without repeats.
cnn_nvidia_lib_dirs() {
  {
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do echo "$d"; done
    for sp in $(cnn_site_packages); do ls -d "$sp"/nvidia/*/lib 2>/dev/null; done
  } | while read -r d; do
    ls "$d"/libcudnn.so* "$d"/libcublasLt.so* "$d"/libnccl.so* "$d"/libcudart.so* >/dev/null 2>&1 && echo "$d"
  done | awk '!seen[$0]++'
}
# The driver's libcuda.so.1: where the machine's loader cache says (RHEL: /usr/lib64, which the bundle's
# Debian-built loader does not search by default), or where container runtimes and WSL put it.
cnn_driver_lib_dirs() {
  for ldconfig in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
    command -v "$ldconfig" >/dev/null 2>&1 && { "$ldconfig" -p 2>/dev/null; break; }
  done | awk '$1 == "libcuda.so.1" && /x86-64/ { sub(/\/[^\/]*$/, "", $NF); print $NF }'
  ls -d /usr/local/nvidia/lib64 /usr/lib/wsl/lib 2>/dev/null
}
# Found once: the ranks that the bundle's mpirun starts inherit the answer.
if [ -z "${CNNTRAIN_NVIDIA_DIRS+set}" ]; then
  CNNTRAIN_NVIDIA_DIRS=$( { cnn_nvidia_lib_dirs; cnn_driver_lib_dirs; } | awk '!seen[$0]++' | paste -sd: -)
fi
# The runtime, once: the machine's glibc (its loader at the path the x86-64 ABI fixes) when it is at least as
# new as the bundle's, else the bundle's (lib/glibc); the machine's libstdc++ when it is at least as new as the
# bundle's (lib/cxx) and its glibc is the one in use. The newest wins because libraries of the machine that the
# programs load (the driver, cuDNN, NCCL, a PMIx plugin) may need the machine's newer glibc or libstdc++ (Ubuntu
# 24.04's NCCL package needs glibc 2.38), while the bundle's programs run on any glibc or libstdc++ at least as
# new as theirs. CNNTRAIN_RUNTIME: "host" or "bundle" glibc, then "host" or "bundle" libstdc++; set by the caller
# to "host host", "host bundle" or "bundle bundle" it is taken as it is (any other value is recomputed).
cnn_version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }
cnn_glibcxx() { grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$1" 2>/dev/null | sort -uV | tail -n 1; }
case ${CNNTRAIN_RUNTIME:-} in "host host" | "host bundle" | "bundle bundle") ;; *) CNNTRAIN_RUNTIME="" ;; esac
if [ -z "$CNNTRAIN_RUNTIME" ]; then
  cnn_host_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $NF }')
  if [ -n "$cnn_host_glibc" ] && [ -x /lib64/ld-linux-x86-64.so.2 ] &&
     cnn_version_ge "$cnn_host_glibc" "$(cat "$CNNTRAIN_BUNDLE/GLIBC")"; then
    CNNTRAIN_RUNTIME=host
    cnn_host_cxx=$(for ldconfig in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        command -v "$ldconfig" >/dev/null 2>&1 && { "$ldconfig" -p 2>/dev/null; break; }
      done | awk '$1 == "libstdc++.so.6" && /x86-64/ { print $NF; exit }')
    cnn_bundle_cxx=$(cnn_glibcxx "$CNNTRAIN_BUNDLE/lib/cxx/libstdc++.so.6")
    if [ -n "$cnn_host_cxx" ] && cnn_version_ge "$(cnn_glibcxx "$cnn_host_cxx")" "$cnn_bundle_cxx"; then
      CNNTRAIN_RUNTIME="$CNNTRAIN_RUNTIME host"
    else
      CNNTRAIN_RUNTIME="$CNNTRAIN_RUNTIME bundle"
    fi
  else
    CNNTRAIN_RUNTIME="bundle bundle"
  fi
fi
CNNTRAIN_LIBRARY_PATH="$CNNTRAIN_BUNDLE/lib"
case $CNNTRAIN_RUNTIME in bundle*) CNNTRAIN_LIBRARY_PATH="$CNNTRAIN_LIBRARY_PATH:$CNNTRAIN_BUNDLE/lib/glibc" ;; esac
case $CNNTRAIN_RUNTIME in *bundle) CNNTRAIN_LIBRARY_PATH="$CNNTRAIN_LIBRARY_PATH:$CNNTRAIN_BUNDLE/lib/cxx" ;; esac
CNNTRAIN_LIBRARY_PATH="$CNNTRAIN_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CNNTRAIN_LIBRARY_PATH="$CNNTRAIN_LIBRARY_PATH${CNNTRAIN_NVIDIA_DIRS:+:$CNNTRAIN_NVIDIA_DIRS}"
# Open MPI relocated to the bundle: its prefix and every directory it would otherwise take from its build.
OPAL_PREFIX=$CNNTRAIN_BUNDLE
OPAL_EXEC_PREFIX=$CNNTRAIN_BUNDLE
OPAL_LIBDIR=$CNNTRAIN_BUNDLE/lib
OPAL_BINDIR=$CNNTRAIN_BUNDLE/libexec  # the orted wrapper, which a process started without mpirun forks
OPAL_PKGLIBDIR=$(ls -d "$CNNTRAIN_BUNDLE"/lib/*/openmpi/lib/openmpi3 2>/dev/null | head -1)
OPAL_DATADIR=$CNNTRAIN_BUNDLE/share
OPAL_PKGDATADIR=$CNNTRAIN_BUNDLE/share/openmpi
OPAL_SYSCONFDIR=$CNNTRAIN_BUNDLE/etc/openmpi
PMIX_MCA_mca_base_component_path=$CNNTRAIN_BUNDLE/lib/pmix
PMIX_INSTALL_PREFIX=$CNNTRAIN_BUNDLE
PATH=$CNNTRAIN_BUNDLE/bin:$PATH
# cnntrain finds its CUDA plugin beside /proc/self/exe, which is the loader: the machine's is elsewhere.
CNNTRAIN_CUDA_PLUGIN=${CNNTRAIN_CUDA_PLUGIN:-$CNNTRAIN_BUNDLE/lib/libcnntrain-cuda.so}
export CNNTRAIN_RUNTIME CNNTRAIN_CUDA_PLUGIN OPAL_PREFIX OPAL_EXEC_PREFIX OPAL_LIBDIR OPAL_BINDIR OPAL_PKGLIBDIR \
  OPAL_DATADIR OPAL_PKGDATADIR \
  OPAL_SYSCONFDIR PMIX_MCA_mca_base_component_path PMIX_INSTALL_PREFIX PATH CNNTRAIN_BUNDLE CNNTRAIN_NVIDIA_DIRS
# Open MPI insists on finding ssh or rsh even for processes on this node only; a machine without either
# (containers, minimal images) gets a stand-in that is never run for local launches.
if [ -z "${OMPI_MCA_plm_rsh_agent:-}" ] && ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
  export OMPI_MCA_plm_rsh_agent=false
fi
