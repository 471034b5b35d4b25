#!/usr/bin/env bash
# Environment variables that change results (docs/environment.md) are logged at start and recorded in the start
# event of metrics.jsonl ("env"); armed test hooks each log a warning that the results are not production ones
# and are recorded too ("test_hooks"); a run without them records neither. Every CNNTRAIN_* name the sources
# read is in the one table (src/train/env_switches.cpp) and documented.
source "$(dirname "$0")/lib.bash"
for v in $(grep -rhoE '"CNNTRAIN_[A-Z0-9_]+' src kernels io --include='*.cpp' --include='*.cu' --include='*.h' |
           tr -d '"' | sort -u); do
  grep -q "{\"$v\", EnvKind::" src/train/env_switches.cpp || fail "$v is read but not in src/train/env_switches.cpp"
  grep -q "^| \`$v\`" docs/environment.md || fail "$v is not in docs/environment.md"
done
args=(--config jobs/fashion_mnist.ini --train.max_steps 3 --data.test "" --checkpoint.at_end false)
"$BUILD/cnntrain" "${args[@]}" --run-dir "$E2E_TMP/plain" > "$E2E_TMP/plain.log" 2>&1 ||
  { cat "$E2E_TMP/plain.log"; fail "the plain run failed"; }
! grep -q "environment that changes results\|test hook" "$E2E_TMP/plain/log.txt" || fail "the plain run logs switches"
$PY -c 'import json, sys
start = [json.loads(l) for l in open(sys.argv[1]) if "\"event\":\"start\"" in l][0]
assert "env" not in start and "test_hooks" not in start and start["model"] == "fmnist_cnn", start' \
  "$E2E_TMP/plain/metrics.jsonl" || fail "the plain run's start event records env or hooks (or is missing)"
CNNTRAIN_WINOGRAD=0 CNNTRAIN_MIN_PARALLEL_MFLOP=7 CNNTRAIN_TEST_DELAY=0:forward:1 CNNTRAIN_TEST_CKPT_SLEEP_MS=1 \
  "$BUILD/cnntrain" "${args[@]}" --run-dir "$E2E_TMP/env" > "$E2E_TMP/env.log" 2>&1 ||
  { cat "$E2E_TMP/env.log"; fail "the run with switches failed"; }
log="$E2E_TMP/env/log.txt"
grep -q "environment that changes results (docs/environment.md): CNNTRAIN_WINOGRAD=0, CNNTRAIN_MIN_PARALLEL_MFLOP=7" \
  "$log" || fail "log.txt does not name the switches:\n$(head -20 "$log")"
for hook in CNNTRAIN_TEST_DELAY=0:forward:1 CNNTRAIN_TEST_CKPT_SLEEP_MS=1; do
  [ "$(grep -c "warning test hook armed: $hook (.*); this run's results are not production ones" "$log")" = 1 ] ||
    fail "log.txt does not announce $hook once:\n$(grep -i hook "$log")"
done
grep -q "^warning: test hook armed: CNNTRAIN_TEST_DELAY" "$E2E_TMP/env.log" || fail "stderr lacks the hook's warning"
$PY - "$E2E_TMP/env/metrics.jsonl" <<'PY' || fail "the start event does not record the switches and hooks"
import json, sys
start = [json.loads(l) for l in open(sys.argv[1]) if '"event":"start"' in l][0]
assert start["env"] == ["CNNTRAIN_WINOGRAD=0", "CNNTRAIN_MIN_PARALLEL_MFLOP=7"], start.get("env")
assert start["test_hooks"] == ["CNNTRAIN_TEST_DELAY=0:forward:1", "CNNTRAIN_TEST_CKPT_SLEEP_MS=1"], start.get("test_hooks")
PY
echo "ok: result-changing environment and armed test hooks logged and recorded in the start event (nothing without)"
