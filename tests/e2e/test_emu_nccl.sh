#!/usr/bin/env bash
# `mpirun -np 4 cnntrain --device emu` trains through the NCCL code path (the emulated NCCL, with deferred
# emulator streams) with synchronised batch norm, and its per-step losses equal those of one CPU process with
# the same global batch within 1e-4 relative; the log shows the binding table and the NCCL gradient sync.
# The same run with --comm.backend mpi (device memory summed through MPI on host copies, what --gpu.share
# uses) agrees too.
source "$(dirname "$0")/lib.bash"
args=(--config jobs/fashion_mnist.ini --data.test "" --train.max_steps 8 --train.batch 8 --log.every_steps 1
      --bn.sync true --comm.bucket_mb 0.25 --checkpoint.at_end false)

losses() {
  $PY - "$1/metrics.jsonl" <<'PY'
import json, sys
print(" ".join(repr(e["loss"]) for e in map(json.loads, filter(str.strip, open(sys.argv[1]))) if e["event"] == "train"))
PY
}
compare() {  # compare RUN REF: per-step losses within 1e-4 relative
  $PY - "$(losses "$1")" "$(losses "$2")" <<'PY'
import sys
a, b = [list(map(float, s.split())) for s in sys.argv[1:3]]
assert len(a) == len(b) == 8, f"expected 8 train events, got {len(a)} and {len(b)}"
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert worst <= 1e-4, f"losses differ by {worst:.2e} relative:\n{a}\n{b}"
print(f"ok: 8 losses agree within {worst:.1e} relative")
PY
}

"$BUILD/cnntrain" "${args[@]}" --device cpu --run-dir "$E2E_TMP/cpu" > /dev/null || fail "cpu np=1 run"
CNNTRAIN_SIMT_DEFER=5 "${MPIRUN[@]}" 4 -x CNNTRAIN_SIMT_DEFER "$BUILD/cnntrain" "${args[@]}" --device emu \
  --run-dir "$E2E_TMP/emu" > "$E2E_TMP/emu.out" 2>&1 || { cat "$E2E_TMP/emu.out"; fail "emu np=4 run"; }
log="$E2E_TMP/emu/log.txt"
grep -q "gradient sync: emulated NCCL" "$log" || fail "np=4 emu did not sum through the NCCL path:\n$(cat "$log")"
[ "$(grep -cE '^  [0-3] +[^ ]+ +[0-3] +0 +emulated' "$log")" = 4 ] || fail "binding table lacks 4 rows:\n$(cat "$log")"
grep -q "bn1 .*batchnorm 16 .* sync" "$log" || fail "the model is not using synchronised batch norm"
[ "$(json_field "$E2E_TMP/emu/metrics.jsonl" end status)" = completed ] || fail "np=4 emu did not complete"
compare "$E2E_TMP/emu" "$E2E_TMP/cpu" || fail "np=4 emu (NCCL, sync BN) and np=1 cpu disagree"

"${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${args[@]}" --device emu --comm.backend mpi --run-dir "$E2E_TMP/staged" \
  > /dev/null 2>&1 || fail "emu np=2 --comm.backend mpi run"
grep -q "gradient sync: MPI on host copies of device memory" "$E2E_TMP/staged/log.txt" || fail "not host-staged"
compare "$E2E_TMP/staged" "$E2E_TMP/cpu" || fail "np=2 emu through host-staged MPI and np=1 cpu disagree"
