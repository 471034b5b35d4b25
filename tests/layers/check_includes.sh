#!/usr/bin/env bash
# The layer order at the level of #include lines, and where MPI and NCCL may appear. check_layers.sh sees
# only symbols, so a header-only dependency in the wrong direction (a class definition, an inline function)
# passes it; this check reads the includes of every source under src/, kernels/ and io/ of ROOT (default:
# the current directory; tests/ and generated code are not checked).
#   Parts: the layers of the Makefile (base with simt = kernels/simt, kernels, comm, io) and, inside train,
#   model, checkpoint, obs, train and main (src/main*.cpp). A part includes its own headers and those of
#   the parts `may` lists for it below: model includes no src/comm header (it is handed a Collectives*,
#   kernels/collectives.h), obs and checkpoint nothing of src/train.
#   <mpi.h> only in comm and checkpoint (its MPI-IO); <nccl.h> only in comm. A src/comm header that includes
#   one of them (directly or through another such header) counts as that header.
# Prints every violation as FILE:LINE and what it includes; exits 1 if there is one.
#   check_includes.sh [ROOT]      the tree at ROOT
#   check_includes.sh --self-test  a planted tree: each planted violation must be named, and nothing else
set -euo pipefail

if [[ ${1:-} == --self-test ]]; then
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
  fail() { echo "check_includes.sh --self-test: FAILED: $*" >&2; exit 1; }
  plant() { mkdir -p "$T/$(dirname "$1")"; printf '#include %s\n' "${@:2}" > "$T/$1"; }
  plant src/comm/mpi_user.cpp '<mpi.h>'              # allowed: MPI lives in src/comm
  plant src/checkpoint/mpi_io.cpp '<mpi.h>' '"io/dataset.h"'  # allowed: MPI-IO
  plant src/comm/wait.h '<mpi.h>'                    # carries <mpi.h> to whoever includes it
  plant src/comm/lazy.h '<nccl.h>'
  plant src/comm/compat.h '"src/comm/lazy.h"'        # carries <nccl.h> one include further
  plant src/train/ok.cpp '"src/comm/comm.h"' '"src/obs/runlog.h"' '"src/model/net.h"'
  plant src/model/bn.cpp '"kernels/collectives.h"' '"src/comm/collectives.h"'
  plant src/obs/observer.cpp '"src/train/config.h"'
  plant kernels/cuda/nccl_user.cu '<nccl.h>'
  plant io/reader.cpp '"src/comm/wait.h"'
  plant src/train/step.cpp '"src/comm/compat.h"'
  plant src/base/error.cpp '"kernels/backend.h"'
  plant kernels/simt/engine.cpp '"kernels/simt/fiber.h"' '"kernels/backend.h"'
  out=$(bash "$0" "$T" 2>&1) && fail "planted violations passed"
  expect=("src/model/bn.cpp:2 includes src/comm/collectives.h: model may include only model, kernels, simt, base"
          "src/obs/observer.cpp:1 includes src/train/config.h: obs may include only obs, model, io, comm, kernels, simt, base"
          "kernels/cuda/nccl_user.cu:1 includes nccl.h: only comm may"
          "io/reader.cpp:1 includes src/comm/wait.h (which includes <mpi.h>): only comm, checkpoint may"
          "src/train/step.cpp:1 includes src/comm/compat.h (which includes <nccl.h>): only comm may"
          "src/base/error.cpp:1 includes kernels/backend.h: base may include only base"
          "kernels/simt/engine.cpp:2 includes kernels/backend.h: simt may include only simt, base")
  for e in "${expect[@]}"; do grep -qF "check-includes: $e" <<<"$out" || fail "missing '$e' in: $out"; done
  n=$(grep -c '^check-includes:' <<<"$out")
  ((n == ${#expect[@]})) || fail "$n violations reported, expected ${#expect[@]}: $out"
  echo "check_includes.sh --self-test: ${#expect[@]} planted wrong-way and MPI/NCCL includes named, the allowed ones pass"
  exit 0
fi
cd "${1:-.}"

part_of() {
  case "$1" in
    src/base/*) echo base ;;
    kernels/simt/*) echo simt ;;
    kernels/*) echo kernels ;;
    src/comm/*) echo comm ;;
    io/*) echo io ;;
    src/model/*) echo model ;;
    src/checkpoint/*) echo checkpoint ;;
    src/obs/*) echo obs ;;
    src/train/*) echo train ;;
    src/*) echo main ;;
    *) echo "" ;;
  esac
}
declare -A may=(
  [base]="base"
  [simt]="simt base"
  [kernels]="kernels simt base"
  [comm]="comm kernels simt base"
  [io]="io comm kernels simt base"
  [model]="model kernels simt base"
  [checkpoint]="checkpoint io comm kernels simt base"
  [obs]="obs model io comm kernels simt base"
  [train]="train obs checkpoint model io comm kernels simt base"
  [main]="main train obs checkpoint model io comm kernels simt base"
)
declare -A sys_may=([mpi.h]="comm checkpoint" [nccl.h]="comm")

mapfile -t files < <(find src kernels io -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cc' -o -name '*.cu' \
                       -o -name '*.cuh' \) 2>/dev/null | sort)
# "FILE:LINE:HEADER" for every #include of every file.
includes=$(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*[<"][^>"]+[>"]/) {
  h = substr($0, RSTART, RLENGTH); sub(/^[^<"]*[<"]/, "", h); sub(/[>"]$/, "", h); print FILENAME ":" FNR ":" h }' \
  "${files[@]}")

# The comm headers that carry mpi.h or nccl.h, with the system header they carry (to a fixpoint).
declare -A carries=()
while :; do
  changed=0
  while IFS=: read -r f _ h; do
    [[ "$f" == src/comm/*.h && -z "${carries[$f]:-}" ]] || continue
    if [[ -n "${sys_may[$h]:-}" ]]; then carries[$f]=$h; changed=1
    elif [[ -n "${carries[$h]:-}" ]]; then carries[$f]=${carries[$h]}; changed=1; fi
  done <<< "$includes"
  [ $changed = 0 ] && break
done

fail=0
while IFS=: read -r f line h; do
  [ -n "$f" ] || continue
  p=$(part_of "$f")
  sys=${sys_may[$h]:-}
  [ -z "$sys" ] && [ -n "${carries[$h]:-}" ] && sys_h=${carries[$h]} || sys_h=$h
  if [ -n "${sys_may[$sys_h]:-}" ] && [[ " ${sys_may[$sys_h]} " != *" $p "* ]]; then
    via=$([ "$sys_h" != "$h" ] && echo " (which includes <$sys_h>)" || true)
    echo "check-includes: $f:$line includes $h$via: only ${sys_may[$sys_h]// /, } may (MPI and NCCL stay in" \
         "src/comm, behind kernels/collectives.h and src/comm/comm.h)" >&2
    fail=1
  fi
  q=$(part_of "$h")
  case "$h" in src/*|kernels/*|io/*) ;; *) continue ;; esac
  if [ -n "$q" ] && [[ " ${may[$p]} " != *" $q "* ]]; then
    echo "check-includes: $f:$line includes $h: $p may include only ${may[$p]// /, }" >&2
    fail=1
  fi
done <<< "$includes"
[ $fail = 0 ] && echo "check-includes: ${#files[@]} sources include only what their layer may; <mpi.h> only in" \
                      "src/comm and src/checkpoint, <nccl.h> only in src/comm"
exit $fail
