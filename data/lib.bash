# Shared by the data/prepare_*.sh scripts (sourced): the converter, usage errors, and when an output is up to
# date. BUILD names the build directory (default: the repository's build/).
set -euo pipefail
DATA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$DATA_DIR")
BUILD=${BUILD:-$REPO/build}
CONVERT=$BUILD/cnntrain-data
PROG=$(basename "$0")

# die MESSAGE: exit 2, as the programs do for a bad command line or a missing input.
die() {
  echo "$PROG: error: $*" >&2
  exit 2
}

# need_file FILE [HINT]: FILE exists, or die naming it and saying what to do.
need_file() { [[ -f $1 ]] || die "$1 not found${2:+; $2}"; }

need_converter() {
  [[ -x $CONVERT ]] || die "$CONVERT not found; build it with make (or set BUILD to the build directory)"
}

# up_to_date OUTPUT... -- INPUT...: every output exists and is newer than every input (a file, or a folder and
# everything below it), the converter and the script itself, so that a changed converter or script converts
# again, as make would. A skipped output is announced.
up_to_date() {
  local outs=() o
  while [[ $1 != -- ]]; do outs+=("$1"); shift; done
  shift
  for o in "${outs[@]}"; do
    [[ -e $o ]] || return 1
    [[ -z $(find -H "$@" "$CONVERT" "$0" "${BASH_SOURCE[0]}" -newer "$o" -print -quit) ]] || return 1
  done
  echo "$PROG: ${outs[*]} up to date (remove to convert again)"
}

# commit PARTIAL OUTPUT: moves a finished output (an HDF5 file or LMDB directory) into place and stamps it, so
# that an interrupted conversion never leaves an OUTPUT that looks up to date.
commit() {
  rm -rf "$2"
  mv "$1" "$2"
  touch "$2"
}
