#!/usr/bin/env bash
# Environment variables that change results (docs/environment.md) are logged at start and recorded in the start
# event of metrics.jsonl; a run without them records none.
source "$(dirname "$0")/lib.bash"
args=(--config jobs/fashion_mnist.ini --train.max_steps 3 --data.test "" --checkpoint.at_end false)
"$BUILD/cnntrain" "${args[@]}" --run-dir "$E2E_TMP/plain" > "$E2E_TMP/plain.log" 2>&1 ||
  { cat "$E2E_TMP/plain.log"; fail "the plain run failed"; }
! grep -q "environment that changes results" "$E2E_TMP/plain/log.txt" || fail "the plain run logs switches"
$PY -c 'import json, sys
start = [json.loads(l) for l in open(sys.argv[1]) if "\"event\":\"start\"" in l][0]
assert "env" not in start and start["model"] == "fmnist_cnn", start' "$E2E_TMP/plain/metrics.jsonl" ||
  fail "the plain run's start event records env (or is missing)"
CNNTRAIN_WINOGRAD=0 CNNTRAIN_MIN_PARALLEL_MFLOP=7 "$BUILD/cnntrain" "${args[@]}" --run-dir "$E2E_TMP/env" \
  > "$E2E_TMP/env.log" 2>&1 || { cat "$E2E_TMP/env.log"; fail "the run with switches failed"; }
grep -q "environment that changes results (docs/environment.md): CNNTRAIN_WINOGRAD=0, CNNTRAIN_MIN_PARALLEL_MFLOP=7" \
  "$E2E_TMP/env/log.txt" || fail "log.txt does not name the switches:\n$(head -20 "$E2E_TMP/env/log.txt")"
$PY - "$E2E_TMP/env/metrics.jsonl" <<'PY' || fail "the start event does not record the switches"
import json, sys
start = [json.loads(l) for l in open(sys.argv[1]) if '"event":"start"' in l][0]
assert start["env"] == ["CNNTRAIN_WINOGRAD=0", "CNNTRAIN_MIN_PARALLEL_MFLOP=7"], start.get("env")
PY
echo "ok: result-changing environment logged and recorded in the start event (and nothing without it)"
