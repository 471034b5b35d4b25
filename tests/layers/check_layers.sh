#!/usr/bin/env bash
# Fails when a library calls into a layer above it. Arguments: one group per layer, lowest first, each
# "NAME:LIB [LIB...]". A library may use symbols of the layers below its own and of itself only; two
# libraries of the same layer may not use each other either. Archives are checked with nm, so a dependency
# in the wrong direction fails even when the final link would happen to resolve it.
set -euo pipefail

defined() { nm -g -P --defined-only "$1" 2>/dev/null | awk 'NF >= 2 && $2 ~ /^[A-Za-z]$/ && $2 != "U" {print $1}' | sort -u; }
undefined() { nm -g -P --undefined-only "$1" 2>/dev/null | awk 'NF >= 2 {print $1}' | sort -u; }

names=(); libs=()
for group in "$@"; do
  names+=("${group%%:*}")
  libs+=("${group#*:}")
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for ((i = 0; i < ${#names[@]}; ++i)); do
  for lib in ${libs[i]}; do
    [ -f "$lib" ] || { echo "check-layers: $lib not built" >&2; exit 1; }
    undefined "$lib" | comm -23 - <(defined "$lib") > "$tmp/needs"
    for ((j = i; j < ${#names[@]}; ++j)); do
      for other in ${libs[j]}; do
        [ "$other" = "$lib" ] && continue
        defined "$other" | comm -12 "$tmp/needs" - > "$tmp/bad"
        if [ -s "$tmp/bad" ]; then
          fail=1
          echo "check-layers: $lib (layer ${names[i]}) uses symbols of $other (layer ${names[j]}), which is not" \
               "below it:" >&2
          head -5 "$tmp/bad" | c++filt | sed 's/^/  /' >&2
          echo "  move the code it needs down, or pass it in from above (see src/base/error.h's hooks)" >&2
        fi
      done
    done
  done
done
exit $fail
