#!/usr/bin/env bash
# The counting of `make test` (tests/run_parts.sh): a passing, a failing and a skipping part are counted as
# such, every part runs after a failure, the closing line says so and the exit status is non-zero; parts run
# one at a time.
set -uo pipefail
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "test_run_parts.sh: FAILED: $*" >&2; exit 1; }
out=$(bash tests/run_parts.sh "$T/r" 'ok=echo fine' 'bad=echo broken; exit 3' \
        'skip=echo "no nvcc here" > "$CNNTRAIN_PART_SKIP_FILE"' 'after=touch '"$T"'/after-ran' 2>&1)
rc=$?
[[ $rc == 1 ]] || fail "exit $rc with a failing part"
[[ $(tail -1 <<<"$out") == "make test: 2 passed, 1 failed, 1 skipped" ]] || fail "closing line: $(tail -1 <<<"$out")"
[[ -e $T/after-ran ]] || fail "the part after a failure did not run"
grep -qx "skipped: skip: no nvcc here" <<<"$out" || fail "the skip reason is not shown"
grep -q "FAILED: bad (exit 3" <<<"$out" || fail "the failing part is not named"
[[ $(cat "$T/r/bad.log") == broken ]] || fail "the failing part's log"
out=$(bash tests/run_parts.sh "$T/r2" 'a=true' 'b=true' 2>&1) || fail "all parts passed, yet exit $?"
[[ $(tail -1 <<<"$out") == "make test: 2 passed, 0 failed, 0 skipped" ]] || fail "closing line: $(tail -1 <<<"$out")"
# One part at a time, also under `make -j2 test` (docs/testing.md: the timing-sensitive e2e parts must not
# share the cores with another part): the second part starts after the first has finished.
out=$(bash tests/run_parts.sh "$T/r3" 'first=touch '"$T"'/first-running; sleep 0.3; rm '"$T"'/first-running' \
        'second=[[ ! -e '"$T"'/first-running ]]' 2>&1) || fail "parts overlapped:\n$out"
echo "test_run_parts.sh: passes, failures and skips counted; every part runs, one at a time; exit status follows failures"
