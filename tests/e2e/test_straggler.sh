#!/usr/bin/env bash
# Per-rank step breakdown and straggler detection at np 3: the test-only hook CNNTRAIN_TEST_DELAY makes rank 1
# sleep in its backward phase every step; every log interval gathers each rank's phases into one ranks event
# and rank 0's log names the straggler, its host and the phase.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
# 60 ms per step: far above what the small model's backward takes even on a loaded machine, so rank 1's busy
# time is well over twice the median.
CNNTRAIN_TEST_DELAY=1:backward:60 "${MPIRUN[@]}" 3 -x CNNTRAIN_TEST_DELAY "$BUILD/cnntrain" \
  --config jobs/fashion_mnist.ini --data.test "" --train.batch 48 --train.max_steps 20 --log.every_steps 10 \
  --log.straggler_pct 50 --run-dir "$T/run" > "$T/out.log" 2>&1 || { cat "$T/out.log"; fail "training"; }
host=$(hostname)
grep -q "straggler: rank 1 on $host, backward [0-9]*% above the median" "$T/out.log" ||
  { cat "$T/out.log"; fail "rank 1 not named as the straggler in its backward phase"; }
grep -q "straggler: rank 1 on $host, backward" "$T/run/log.txt" || fail "the straggler is not in log.txt"
$PY - "$T/run/metrics.jsonl" <<'PYEOF' || fail "ranks events"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
start = [e for e in ev if e["event"] == "start"][0]
assert len(start["hosts"]) == 3, start
ranks = [e for e in ev if e["event"] == "ranks"]
assert [e["step"] for e in ranks] == [10, 20], ranks
for e in ranks:
    for k in ("data_s", "h2d_s", "forward_s", "backward_s", "comm_s", "optimizer_s", "checkpoint_s", "busy_s",
              "mem_in_use", "mem_peak", "rss", "rss_peak", "steps", "straggler"):
        assert len(e[k]) == 3, (k, e)
    assert e["steps"] == [10, 10, 10], e
    assert e["backward_s"][1] >= 0.060, e          # the injected sleep is in rank 1's backward time
    assert e["straggler"][1] == 1, e
    assert all(m > 0 for m in e["mem_peak"]) and all(r > 0 for r in e["rss"]), e
    # The others wait for rank 1 in the gradient allreduce: their exposed communication shows it.
    assert min(e["comm_s"][0], e["comm_s"][2]) > e["comm_s"][1], e
print("ok: ranks events with per-rank arrays; rank 1's backward holds the delay, the others wait in comm")
PYEOF
echo "ok: straggler named: $(grep -m1 -o 'straggler: rank 1.*' "$T/out.log")"
