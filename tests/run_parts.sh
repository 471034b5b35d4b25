#!/usr/bin/env bash
# Runs the parts of `make test` one after another and counts what they did (docs/testing.md):
#   run_parts.sh RESULTS_DIR PART...        PART = "name=command" (run with bash -c)
# Every part runs even after another failed. A part passes when its command exits 0, fails otherwise, and is
# skipped when it exits 0 after writing its reason to the file named by $CNNTRAIN_PART_SKIP_FILE (a part that could
# not check anything here, e.g. nvcc missing). Each part's output goes to the terminal and to
# RESULTS_DIR/<name>.log; RESULTS_DIR/summary.tsv holds name, status, seconds. The last line is
#   make test: N passed, M failed, K skipped
# and the exit status is 1 when any part failed.
set -uo pipefail
results=$1
shift
rm -rf "$results"
mkdir -p "$results"
passed=0 failed=0 skipped=0
failures=() skips=()
for part in "$@"; do
  name=${part%%=*} cmd=${part#*=}
  skip_file=$results/$name.skip
  echo "== $name"
  start=$SECONDS
  CNNTRAIN_PART_SKIP_FILE=$skip_file bash -c "$cmd" 2>&1 | tee "$results/$name.log"
  rc=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  # The status line starts a line of its own, also after output that did not end with one.
  [[ -s $results/$name.log && $(tail -c 1 "$results/$name.log" | od -An -c | tr -d ' ') != '\n' ]] && echo
  if ((rc != 0)); then
    status=failed; failed=$((failed + 1)); failures+=("$name (exit $rc, log $results/$name.log)")
  elif [[ -s $skip_file ]]; then
    status=skipped; skipped=$((skipped + 1)); skips+=("$name: $(head -1 "$skip_file")")
  else
    status=passed; passed=$((passed + 1))
  fi
  printf '%s\t%s\t%s\n' "$name" "$status" "$secs" >>"$results/summary.tsv"
  echo "== $name: $status (${secs} s)"
done
echo
for s in "${skips[@]}"; do echo "skipped: $s"; done
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "make test: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
