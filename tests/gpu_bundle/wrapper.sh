#!/bin/sh
# @TOOL@ of the cnntrain GPU bundle. Runs libexec/elf/@TOOL@ through an explicit dynamic loader, the newer of the
# machine's and the bundle's (lib/ld-host/@TOOL@ and lib/ld/@TOOL@: each loader under the program's name), so it
# starts on any x86-64 Linux, also one with an older glibc than the build machine's, with the bundle's libraries,
# the user's LD_LIBRARY_PATH, then the machine's NVIDIA libraries (libexec/env.sh) as its search path. The path
# is the loader's --library-path, not LD_LIBRARY_PATH: programs started from here (the ranks mpirun starts are
# wrappers again) see the caller's environment. Works from any directory, through symbolic links.
self=$(readlink -f "$0")
CNNTRAIN_BUNDLE=$(dirname "$(dirname "$self")")
. "$CNNTRAIN_BUNDLE/libexec/env.sh"
# argv[0] without a directory: Open MPI's mpirun takes an absolute argv[0] as --prefix and then puts the bundle's
# lib/ into the LD_LIBRARY_PATH of what it starts, where the machine's /bin/sh would meet the bundle's libc.
# lib/ld-host/@TOOL@: the machine's loader (its glibc is at least as new as the bundle's), lib/ld/@TOOL@ the
# bundle's (env.sh, CNNTRAIN_RUNTIME).
ld=$CNNTRAIN_BUNDLE/lib/ld/@TOOL@
case $CNNTRAIN_RUNTIME in host*) ld=$CNNTRAIN_BUNDLE/lib/ld-host/@TOOL@ ;; esac
exec "$ld" --library-path "$CNNTRAIN_LIBRARY_PATH" --argv0 "${0##*/}" \
  "$CNNTRAIN_BUNDLE/libexec/elf/@TOOL@" "$@"
