#!/usr/bin/env bash
# Live monitoring: a real Prometheus server (Debian's package) on loopback scrapes a running np 2 job every
# second and its query API returns the job's throughput and every rank's series, GPU figures included (from the
# test-only fake NVML), and every query of the Grafana dashboard in docs/ answers; promtool lints the endpoint's
# output and the node's textfile; the GPU figures reach metrics.jsonl and TensorBoard. Without the fake on a CPU
# run: one log line and no GPU figures anywhere. An unwritable textfile and a port in use: one warning each, and
# the job carries on; a rank whose NVML finds no device warns on its stderr and shows null.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
FAKE=$PWD/$BUILD/tests/libfake-nvml.so
[ -f "$FAKE" ] || fail "$FAKE is missing: make $BUILD/tests/libfake-nvml.so (make test builds it)"
command -v prometheus > /dev/null && command -v promtool > /dev/null ||
  fail "prometheus and promtool are not installed: make deps installs Debian's prometheus package"
TBPY=$(bash tests/obs/tb_venv.sh "$BUILD/tbvenv") ||
  fail "the TensorBoard reader could not be installed (message above); this test needs PyPI once"

# Whatever this script started goes with it, whatever way it ends.
PIDS=()
stop_all() {
  local rc=$?
  set +e  # errexit would end the handler at the first failing kill or at `(exit "$rc")` below
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  [ -z "${KEEP_TMP:-}" ] || exit "$rc"
  (exit "$rc")
  e2e_cleanup
}
trap stop_all EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# fetch URL OUT: the body to OUT; prints the Content-Type.
fetch() {
  $PY -c 'import sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=5)
open(sys.argv[2], "wb").write(r.read())
print(r.headers["Content-Type"])' "$@"
}
# wait_for SECONDS COMMAND...: until the command succeeds.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
COMMON=(--config jobs/fashion_mnist.ini --data.test "" --train.batch 32 --train.max_steps 100000
        --log.every_steps 5 --log.gpu_stats_s 0.2 --log.prometheus_addr 127.0.0.1)

# --- np 2 with the fake NVML, scraped by Prometheus ---
JOB_PORT=$(free_port)
PROM_PORT=$(free_port)
PROM=http://127.0.0.1:$PROM_PORT
cat > "$T/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: cnntrain
    static_configs:
      - targets: ['127.0.0.1:$JOB_PORT']
EOF
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" --web.listen-address="127.0.0.1:$PROM_PORT" \
  --log.level=warn > "$T/prometheus.log" 2>&1 &
PIDS+=($!)
$PY tests/obs/prom_query.py "$PROM" --ready 30 || { cat "$T/prometheus.log"; fail "Prometheus did not start"; }
mkdir "$T/textfile"
CNNTRAIN_TEST_NVML=$FAKE "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/run" \
  --log.prometheus_port "$JOB_PORT" --log.prometheus_file "$T/textfile/cnntrain-%h.prom" --checkpoint.every_steps 50 \
  > "$T/run.log" 2>&1 &
MPI=$!
PIDS+=($MPI)
$PY tests/obs/prom_query.py "$PROM" 60 \
  'up{job="cnntrain"} => 1 series' \
  'count_over_time(cnntrain_step[1m]) => > 1' \
  'cnntrain_samples_per_second{job="cnntrain"} => > 0' \
  'cnntrain_loss => 1 series' \
  'cnntrain_rank_step_seconds => 2 series' \
  'cnntrain_rank_phase_seconds{phase="backward"} => 2 series' \
  'cnntrain_gpu_utilization_ratio => > 0.29' \
  'cnntrain_gpu_power_watts => 2 series' \
  'cnntrain_gpu_memory_total_bytes => > 17179869183' \
  --dashboard docs/grafana_cnntrain.json cnntrain ||
  { cat "$T/run.log" "$T/prometheus.log"; fail "Prometheus' query API does not show the job (or the dashboard's queries fail)"; }
type=$(fetch "http://127.0.0.1:$JOB_PORT/metrics" "$T/scrape.txt")
[ "$type" = "text/plain; version=0.0.4; charset=utf-8" ] || fail "Content-Type '$type'"
promtool check metrics < "$T/scrape.txt" || fail "promtool rejects /metrics"
wait_for 10 compgen -G "$T/textfile/cnntrain-*.prom" > /dev/null || fail "no textfile in $T/textfile"
cp "$T"/textfile/cnntrain-*.prom "$T/node.prom"
promtool check metrics < "$T/node.prom" || fail "promtool rejects the textfile"
for want in '^cnntrain_samples_per_second ' '^cnntrain_rank_step_seconds{rank="1",' '^cnntrain_gpu_temperature_celsius{rank="0",'; do
  grep -q "$want" "$T/node.prom" || fail "the textfile has no line matching $want"
done
echo "ok: promtool accepts /metrics and the textfile; the textfile holds the job's and both ranks' figures"
kill -USR1 $MPI
rc=0
wait $MPI || rc=$?
[ $rc = 75 ] || { cat "$T/run.log"; fail "the scraped job ended with $rc, want 75 (stopped by SIGUSR1)"; }
! compgen -G "$T/textfile/*" > /dev/null || fail "the textfile outlived the job: $(ls "$T/textfile")"
grep -q "^test-only: NVML is $FAKE (CNNTRAIN_TEST_NVML)" "$T/run.log" || fail "the fake NVML was not announced"
grep -q "^GPU figures: NVML every 0.2 s on 2 of 2 ranks (rank 0: Fake NVML GPU 0, index 0)$" "$T/run.log" ||
  fail "no GPU figures line: $(grep GPU "$T/run.log")"
$PY - "$T/run/metrics.jsonl" << 'PYEOF' || fail "GPU figures in metrics.jsonl"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
train = [e for e in ev if e["event"] == "train"]
ranks = [e for e in ev if e["event"] == "ranks"]
assert train and ranks
for e in train:  # rank 0 = fake device 0: its scripted readings bound the window's mean
    assert 30 <= e["gpu_util_pct"] <= 50 and 60 <= e["gpu_temp_c"] <= 62 and 150 <= e["gpu_power_w"] <= 160, e
    assert e["gpu_mem_total"] == 16 << 30 and (1 << 30) <= e["gpu_mem_used"] <= 1.5 * (1 << 30), e
for e in ranks:  # device r: readings shifted by r
    assert len(e["gpu_util_pct"]) == 2 and 31 <= e["gpu_util_pct"][1] <= 51, e
    assert 151 <= e["gpu_power_w"][1] <= 161 and e["gpu_mem_used"][1] >= 2 << 30, e
print("ok: GPU figures in all %d train and %d ranks events" % (len(train), len(ranks)))
PYEOF
"$TBPY" tests/obs/tb_check.py "$T/run" || fail "TensorBoard does not show metrics.jsonl (GPU figures included)"

# --- a CPU run without the fake: one line, no GPU figures; an unwritable textfile: one warning ---
PORT2=$(free_port)
"$BUILD/cnntrain" "${COMMON[@]}" --run-dir "$T/cpu" --log.prometheus_port "$PORT2" \
  --log.prometheus_file "$T/missing/x.prom" > "$T/cpu.log" 2>&1 &
CPU=$!
PIDS+=($CPU)
has_rank_figures() { fetch "http://127.0.0.1:$PORT2/metrics" "$T/cpu.txt" > /dev/null 2>&1 &&
  grep -q '^cnntrain_rank_step_seconds{rank="0"' "$T/cpu.txt"; }
wait_for 60 has_rank_figures || { cat "$T/cpu.log"; fail "the CPU run's endpoint shows no rank figures"; }
# A few log intervals: the unwritable file is retried at each, and warned about once.
three_intervals() { [ "$(grep -c '"event":"train"' "$T/cpu/metrics.jsonl")" -ge 3 ]; }
wait_for 60 three_intervals || fail "the CPU run logs no train events"
kill -USR1 $CPU
rc=0
wait $CPU || rc=$?
[ $rc = 75 ] || { cat "$T/cpu.log"; fail "the CPU run ended with $rc, want 75"; }
! grep -q cnntrain_gpu_ "$T/cpu.txt" || fail "GPU series on a CPU run without NVML"
! grep -q '"gpu_' "$T/cpu/metrics.jsonl" || fail "GPU fields in metrics.jsonl of a CPU run without NVML"
[ "$(grep -c GPU "$T/cpu.log")" = 1 ] && grep -q "^GPU figures: none (--device cpu has no GPU)$" "$T/cpu.log" ||
  fail "want the one line 'GPU figures: none', got: $(grep GPU "$T/cpu.log")"
[ "$(grep -c "prometheus_file" "$T/cpu.log")" = 1 ] &&
  grep -q "^warning: --log.prometheus_file: cannot write '$T/missing/x.prom': No such file or directory; the job continues" \
    "$T/cpu.log" || fail "want one warning about the textfile: $(grep prometheus_file "$T/cpu.log")"
echo "ok: CPU run: one 'GPU figures: none' line, no GPU figures; one warning for the unwritable textfile"

# --- np 2 where only rank 0 has a (fake) GPU, and a port in use: one warning each, the job completes ---
$PY -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(120)' > "$T/busy.port" &
PIDS+=($!)
wait_for 10 test -s "$T/busy.port" || fail "no listener to occupy a port"
BUSY=$(cat "$T/busy.port")
CNNTRAIN_TEST_NVML=$FAKE FAKE_NVML_DEVICES=1 "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${COMMON[@]}" --train.max_steps 10 \
  --run-dir "$T/busy" --log.prometheus_port "$BUSY" > "$T/busy.log" 2>&1 || { cat "$T/busy.log"; fail "a port in use failed the job"; }
[ "$(grep -c "prometheus_port" "$T/busy.log")" = 1 ] &&
  grep -q "^warning: --log.prometheus_port $BUSY: cannot listen on 127.0.0.1:$BUSY: Address already in use; the job continues" \
    "$T/busy.log" || fail "want one warning about the port: $(grep -i prometheus "$T/busy.log")"
grep -q "^GPU figures: NVML every 0.2 s on 1 of 2 ranks (rank 0: Fake NVML GPU 0, index 0)$" "$T/busy.log" &&
  grep -q "^warning: \[rank 1/2 on .*\] GPU figures: none on this rank: nvmlDeviceGetHandleByIndex_v2(1) failed: Invalid Argument$" \
    "$T/busy.log" || fail "rank 1's missing GPU figures are not reported: $(grep GPU "$T/busy.log")"
grep '"event":"ranks"' "$T/busy/metrics.jsonl" | tail -1 | matches '"gpu_util_pct":\[[0-9.]*,null\]' ||
  fail "the ranks event does not show rank 1 without GPU figures"
echo "ok: a port in use is one warning and the job completes; a rank without GPU figures warns and shows null"
