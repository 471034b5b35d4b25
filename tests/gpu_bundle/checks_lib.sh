# shellcheck shell=bash
# The machinery of run-gpu-checks.sh (sourced by it): time-limited steps, gtest cases each with its own verdict
# and time limit, the check list, the summary table and report.json. Plain bash, awk and coreutils: the GPU
# machine may have no Python, and Python must not be needed to learn what failed.
# Set before sourcing: OUT (the output directory). Tuning, for tests and quick looks:
#   CNNTRAIN_CHECKS_MAX_STEP_S   cap on every step's and every gtest case's time limit (default: none)
#   CNNTRAIN_CHECKS_KILL_AFTER   seconds between SIGTERM and SIGKILL of a step over its limit (default 10)
#   CNNTRAIN_CHECKS_PER_CASE=1   one process per gtest case (default: one per crash, see run_gtest_cases)
LOGS=$OUT/logs
REPORT=$OUT/report.txt
CHECKS=$OUT/checks.tsv      # name, status, seconds, detail, gtest group ("" for other checks)
VERSIONS=$OUT/versions.tsv  # key, value
KILL_AFTER=${CNNTRAIN_CHECKS_KILL_AFTER:-10}
mkdir -p "$LOGS"
: >"$REPORT"
: >"$CHECKS"
: >"$VERSIONS"
declare -A GROUP_FAILS
CHILD=""     # the step running now (a `timeout` process), for the signal trap
FINISHED=0

say() { echo "$*" | tee -a "$REPORT"; }
section() { say ""; say "== $*"; }
# One line of printable ASCII, of the arguments or else of stdin: details go into a table and into JSON.
oneline() {
  if (($#)); then printf '%s' "$*"; else cat; fi | LC_ALL=C tr '\t\n\r' '   ' | LC_ALL=C tr -cd '\40-\176' | cut -c1-400
}
# limit SECONDS: the time limit a step gets (CNNTRAIN_CHECKS_MAX_STEP_S caps it).
limit() { local s=$1 cap=${CNNTRAIN_CHECKS_MAX_STEP_S:-}; [[ -n $cap ]] && ((cap < s)) && s=$cap; echo "$s"; }

version() { printf '%s\t%s\n' "$1" "$(oneline "$2")" >>"$VERSIONS"; say "  $1: $2"; }

# record NAME pass|fail|skip SECONDS DETAIL [GROUP]
record() {
  local detail
  detail=$(oneline "$4")
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$detail" "${5:-}" >>"$CHECKS"
  # gtest cases: the group's line counts them; the first failures of a group are printed as they come.
  if [[ -n ${5:-} ]]; then
    [[ $2 == fail ]] && GROUP_FAILS[$5]=$((${GROUP_FAILS[$5]:-0} + 1))
    [[ $2 == fail && ${GROUP_FAILS[$5]} -le 5 ]] || return 0
  fi
  say "-> $1: $2 (${3}s)${detail:+: $detail}"
}

# step NAME LIMIT CMD...: runs CMD under `timeout -k` (SIGTERM at LIMIT seconds, SIGKILL KILL_AFTER later: the
# trainer only checks for SIGTERM between steps), output to logs/NAME.log; records pass or fail; returns CMD's
# status. In the background with `wait`, so that a signal to this script is handled at once. A pass's detail:
# the output of the command STEP_RESULT (e.g. the images/s measured), if set, else STEP_DETAIL.
step() {
  local name=$1 lim rc=0 t0=$SECONDS detail
  lim=$(limit "$2")
  shift 2
  echo "\$ $*" >"$LOGS/$name.log"
  timeout -k "$KILL_AFTER" "$lim" "$@" >>"$LOGS/$name.log" 2>&1 &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  if ((rc == 0)); then
    detail=${STEP_DETAIL:-}
    [[ -z ${STEP_RESULT:-} ]] || detail=$(eval "$STEP_RESULT")
    record "$name" pass $((SECONDS - t0)) "$detail"
  else
    detail=$(exit_text "$rc" "$lim")
    record "$name" fail $((SECONDS - t0)) "$detail: $(tail -n +2 "$LOGS/$name.log" | tail -n 3 | oneline)\
 (logs/$name.log)"
  fi
  return "$rc"
}

# losses RUN_DIR: the training losses of a run, one per step logged (its metrics.jsonl's train events).
losses() { sed -n 's/.*"event":"train".*"loss":\([-0-9.eE+naif]*\).*/\1/p' "$1/metrics.jsonl" 2>/dev/null; }

exit_text() {
  case $1 in
    124) echo "over its ${2}s limit, stopped by SIGTERM" ;;
    137) echo "over its ${2}s limit and still running ${KILL_AFTER}s after SIGTERM, killed" ;;
    *) (($1 > 128)) && echo "killed by signal $(($1 - 128)) ($(kill -l $(($1 - 128)) 2>/dev/null))" || echo "exit $1" ;;
  esac
}

# gtest_list BIN FILTER: the full names of the cases BIN has under FILTER, one per line.
gtest_list() {
  timeout -k "$KILL_AFTER" "$(limit 60)" "$1" --gtest_list_tests --gtest_filter="$2" 2>/dev/null |
    awk '/^[^ ]/ && /\.$/ { suite = $1; next } /^  [^ ]/ && suite != "" { print suite $1 }'
}

# gtest_results LOG: "NAME STATUS MS" per finished case, then "INFLIGHT NAME" for a case that started but has no
# verdict (the process died or was stopped in it).
gtest_results() {
  awk '/^\[ RUN      \] / { run = $4; next }
       /^\[       OK \] |^\[  FAILED  \] |^\[  SKIPPED \] / {
         name = $4; sub(/,$/, "", name); if (name != run || seen[name]++) next
         st = $2 == "OK" ? "pass" : $2 == "FAILED" ? "fail" : "skip"
         ms = $0; if (!sub(/.*\(/, "", ms) || !sub(/ ms\)$/, "", ms)) ms = 0
         print name, st, ms; run = "" }
       END { if (run != "") print "INFLIGHT", run }' "$1"
}

# gtest_detail LOG NAME: the first failure message of case NAME (its first two lines).
gtest_detail() {
  awk -v n="$2" '$0 == "[ RUN      ] " n { on = 1; next } on && /^\[/ { exit } on && NF { print; if (++k == 2) exit }' \
    "$1" | oneline
}

# gtest_last_output LOG: the last lines the case in flight printed.
gtest_last_output() { awk '/^\[ RUN      \] / { n = 0; next } { line[n++ % 3] = $0 }
  END { for (i = n > 3 ? n - 3 : 0; i < n; i++) print line[i % 3] }' "$1" | oneline; }

# run_gtest_cases GROUP BIN FILTER CASE_LIMIT: every case of BIN under FILTER gets its own verdict and its own
# time limit. The cases run in one process while they pass or fail normally; when the process dies (a fatal
# CUDA error aborts it) or a case overruns CASE_LIMIT (SIGTERM, SIGKILL after KILL_AFTER), the case in flight
# is recorded as failed and the rest go on in a fresh process: a fatal error costs one case, and the run
# starts 1 + (crashes) processes, not one per case (each start pays for CUDA context and cuDNN/cuBLAS
# initialisation: 160+ cases would spend minutes on it). CNNTRAIN_CHECKS_PER_CASE=1 starts one per case.
run_gtest_cases() {
  local group=$1 bin=$2 filter=$3 lim pending round=0 t0=$SECONDS n total
  lim=$(limit "$4")
  pending=$(gtest_list "$bin" "$filter")
  if [[ -z $pending ]]; then
    record "$group" fail 0 "no test case matched '$filter' ($bin --gtest_list_tests: $(
      "$bin" --gtest_list_tests 2>&1 | tail -n 2 | oneline))"
    return 1
  fi
  total=$(wc -l <<<"$pending")
  while [[ -n $pending ]]; do
    round=$((round + 1))
    local batch=$pending log=$LOGS/$group.$round.log
    [[ ${CNNTRAIN_CHECKS_PER_CASE:-0} == 1 ]] && batch=$(head -n 1 <<<"$pending")
    n=$(wc -l <<<"$batch")
    gtest_round "$bin" "$(paste -sd: - <<<"$batch")" "$lim" "$n" "$log"
    local rc=$ROUND_RC results inflight=""
    results=$(gtest_results "$log")
    while read -r name st ms; do
      [[ -z $name ]] && continue
      if [[ $name == INFLIGHT ]]; then
        inflight=$st
        local why
        if ((ROUND_TIMED_OUT)); then why="over its ${lim}s limit, stopped"; else why=$(exit_text "$rc" "$lim"); fi
        record "$group/$st" fail "$ROUND_CASE_S" "the process ended in this case ($why): $(
          gtest_last_output "$log") ($(basename "$log"))" "$group"
      else
        record "$group/$name" "$st" $((ms / 1000)) "$([[ $st == fail ]] && gtest_detail "$log" "$name")" "$group"
      fi
    done <<<"$results"
    if [[ -z $results ]]; then  # the binary did not get to any case
      while read -r name; do
        record "$group/$name" fail 0 "$(exit_text "$rc" "$lim") before any case ran: $(tail -n 3 "$log" | oneline)" \
          "$group"
      done <<<"$batch"
    elif [[ -z $inflight ]] && ((rc != 0 && rc != 1)); then
      record "$group/exit" fail 0 "$(exit_text "$rc" "$lim") after its last case ($(basename "$log"))" "$group"
    fi
    local finished before=$pending
    finished=$(awk '{ print $1 == "INFLIGHT" ? $2 : $1 }' <<<"$results")
    [[ -n $results ]] || finished=$batch
    pending=$(grep -vxF -f <(printf '%s\n' "$finished") <<<"$pending" || true)
    if [[ $pending == "$before" ]]; then  # names in the output that the listing did not have: never loop
      while read -r name; do
        record "$group/$name" fail 0 "did not run ($(basename "$log"))" "$group"
      done <<<"$pending"
      break
    fi
  done
  awk -F'\t' -v g="$group" -v n="$total" -v s=$((SECONDS - t0)) -v r="$round" '$5 == g { c[$2]++ }
    END { printf "%s: %d cases: %d pass, %d fail, %d skip in %d s (%d process%s)\n", g, n, c["pass"], c["fail"],
          c["skip"], s, r, r == 1 ? "" : "es" }' "$CHECKS" | tee -a "$REPORT"
}

# gtest_round BIN FILTER CASE_LIMIT NCASES LOG: one process over FILTER, watched once a second: the case in flight
# (its last "[ RUN ]" line) is stopped when it overruns CASE_LIMIT. Sets ROUND_RC, ROUND_TIMED_OUT and
# ROUND_CASE_S (seconds the last case ran).
gtest_round() {
  local bin=$1 filter=$2 lim=$3 n=$4 log=$5 current="" started=$SECONDS now_case
  ROUND_TIMED_OUT=0
  env CNNTRAIN_REQUIRE_GPU=1 timeout -k "$KILL_AFTER" $((lim * n + 60)) "$bin" --gtest_filter="$filter" >"$log" 2>&1 &
  CHILD=$!
  while kill -0 "$CHILD" 2>/dev/null; do
    sleep 1
    now_case=$(grep -a '^\[ RUN      \] ' "$log" | tail -n 1)
    if [[ $now_case != "$current" ]]; then
      current=$now_case
      started=$SECONDS
    elif ((SECONDS - started > lim && !ROUND_TIMED_OUT)); then
      ROUND_TIMED_OUT=1
      kill -TERM "$CHILD" 2>/dev/null  # timeout passes it on, and sends SIGKILL KILL_AFTER seconds later
    fi
  done
  ROUND_RC=0
  wait "$CHILD" || ROUND_RC=$?
  CHILD=""
  ROUND_CASE_S=$((SECONDS - started))
}

# The summary table (gtest cases counted per group, failed ones named) and report.json.
write_summary() {
  section "summary"
  awk -F'\t' '
    $5 == "" { printf "%-36s %-5s %6ss  %s\n", $1, $2, $3, substr($4, 1, 100); if ($2 == "fail") nf++; next }
    { g[$5]; c[$5, $2]++; t[$5] += $3
      if ($2 == "fail") { nf++; if (++shown[$5] <= 20) bad[$5] = bad[$5] "\n    " $1 } }
    END { for (k in g)
            printf "%-36s %-5s %6ss  %d cases: %d pass, %d fail, %d skip%s\n", k, c[k, "fail"] ? "fail" : "pass",
                   t[k], c[k, "pass"] + c[k, "fail"] + c[k, "skip"], c[k, "pass"], c[k, "fail"], c[k, "skip"], bad[k]
          printf "%d failed\n", nf }' "$CHECKS" | tee -a "$REPORT"
  write_json >"$OUT/report.json.tmp" && mv "$OUT/report.json.tmp" "$OUT/report.json"
  say "report: $REPORT, $OUT/report.json, logs in $LOGS"
}

write_json() {
  awk -F'\t' '
    function q(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
    FNR == 1 { file++ }
    file == 1 { v = v (v == "" ? "" : ",\n    ") q($1) ": " q($2); next }
    { c = c (c == "" ? "" : ",\n    ") "{\"name\": " q($1) ", \"status\": " q($2) ", \"seconds\": " ($3 + 0) \
          ", \"detail\": " q($4) "}" }
    END { printf "{\n  \"versions\": {\n    %s\n  },\n  \"checks\": [\n    %s\n  ]\n}\n", v, c }' \
    <(cat "$VERSIONS"; [[ -s $VERSIONS ]] || printf 'bundle\tunknown\n') <(cat "$CHECKS")
}

# finish STATUS: summary and report.json, then exit: STATUS if given, else 1 when a check failed.
finish() {
  ((FINISHED)) && return
  FINISHED=1
  write_summary
  local rc=${1:-}
  [[ -n $rc ]] || { awk -F'\t' '$2 == "fail" { f = 1 } END { exit f }' "$CHECKS" && rc=0 || rc=1; }
  exit "$rc"
}

# A signal to the script: the step running gets it too (timeout passes it on and kills after KILL_AFTER), and
# the report still gets written.
on_signal() {
  local sig=$1 code=$2
  if [[ -n $CHILD ]]; then
    kill -"$sig" "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  record interrupted fail 0 "run-gpu-checks.sh got SIG$sig; the checks after this point did not run"
  finish "$code"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
# An unexpected end of the script (a bug, `set -u`) still gets its report, and fails.
on_exit() {
  local rc=$1
  ((FINISHED)) && return
  ((rc == 0)) || record run-gpu-checks fail 0 "the script itself ended with exit $rc (a bug: see report.txt);\
 the checks after the last one listed did not run"
  finish
}
trap 'on_exit $?' EXIT
