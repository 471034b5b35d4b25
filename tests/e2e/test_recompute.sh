#!/usr/bin/env bash
# --train.recompute (docs/perf.md, "Activation recomputation"): training with every residual block recomputed,
# and with only some of them, writes the same losses to metrics.jsonl, bit for bit, as training without, on the
# CPU and under the emulator, in fp32 and in bf16 (the emulator: every CPU runs it), with synchronised batch
# norm at np 2; the start event's activation bytes per sample drop; a name that is no block exits 2 naming it.
source "$(dirname "$0")/lib.bash"
args=(--model resnet20 --data.synthetic 64x16x16x3:10 --data.test "" --train.max_steps 6 --train.batch 8
      --train.lr 0.05 --log.every_steps 1 --checkpoint.at_end false --log.tensorboard false)

# same RUN_A RUN_B: identical train losses (6 of them) and fewer activation bytes per sample in RUN_B.
same() {
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def events(p):
    return [json.loads(l) for l in open(p) if l.strip()]
a, b = events(sys.argv[1]), events(sys.argv[2])
la = [e["loss"] for e in a if e["event"] == "train"]
lb = [e["loss"] for e in b if e["event"] == "train"]
assert len(la) == 6 and la == lb, f"losses differ: {la} vs {lb}"
ba = [e for e in a if e["event"] == "start"][0]["activation_bytes_per_sample"]
bb = [e for e in b if e["event"] == "start"][0]["activation_bytes_per_sample"]
assert bb < ba, f"activation bytes per sample {ba} -> {bb}"
print(f"ok: 6 identical losses ({la[0]:.6f} .. {la[-1]:.6f}); activations {ba} -> {bb} bytes per sample")
PY
}

run() {  # run NAME ARGS...: trains into $E2E_TMP/NAME
  local name=$1; shift
  "$@" --run-dir "$E2E_TMP/$name" > "$E2E_TMP/$name.out" 2>&1 || { cat "$E2E_TMP/$name.out"; fail "$name"; }
}

for dev in cpu emu; do
  run $dev "$BUILD/cnntrain" "${args[@]}" --device $dev
  run $dev-all "$BUILD/cnntrain" "${args[@]}" --device $dev --train.recompute true
  same "$E2E_TMP/$dev" "$E2E_TMP/$dev-all" || fail "$dev: --train.recompute true"
done
run cpu-some "$BUILD/cnntrain" "${args[@]}" --train.recompute layer1,layer3.2
same "$E2E_TMP/cpu" "$E2E_TMP/cpu-some" || fail "cpu: --train.recompute layer1,layer3.2"
run emu-bf16 "$BUILD/cnntrain" "${args[@]}" --device emu --precision bf16
run emu-bf16-all "$BUILD/cnntrain" "${args[@]}" --device emu --precision bf16 --train.recompute true
same "$E2E_TMP/emu-bf16" "$E2E_TMP/emu-bf16-all" || fail "emu bf16: --train.recompute true"
run sync "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${args[@]}" --bn.sync true
run sync-all "${MPIRUN[@]}" 2 "$BUILD/cnntrain" "${args[@]}" --bn.sync true --train.recompute true
same "$E2E_TMP/sync" "$E2E_TMP/sync-all" || fail "np 2, --bn.sync: --train.recompute true"

expect_exit 2 "option --train.recompute: 'layer7' names no block" -- \
  "$BUILD/cnntrain" "${args[@]}" --train.recompute layer7 --run-dir "$E2E_TMP/bad"
expect_exit 2 "option --train.recompute: layer conv1 is not a residual block" -- \
  "$BUILD/cnntrain" "${args[@]}" --train.recompute conv1 --run-dir "$E2E_TMP/bad2"
