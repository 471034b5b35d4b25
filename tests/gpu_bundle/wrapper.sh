#!/bin/sh
# @TOOL@ of the cnntrain GPU bundle: sets up the bundle's libraries, Open MPI and the machine's NVIDIA
# libraries (libexec/env.sh), then runs the real program. Works from any directory, through symlinks.
self=$(readlink -f "$0")
CNN_BUNDLE=$(dirname "$(dirname "$self")")
. "$CNN_BUNDLE/libexec/env.sh"
exec "$CNN_BUNDLE/libexec/@TOOL@" "$@"
