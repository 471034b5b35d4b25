#!/usr/bin/env bash
# EfficientNet-B0's stochastic depth (--model.stochastic_depth, docs/models.md) keys each sample's draw by the run's
# seed, the step, the layer and the global sample id: 4 steps on 32x32 synthetic images at global batch 16
# (batch-norm groups of 8, so the statistics do not depend on the rank count either) give the first loss, which
# every draw of the first forward enters, equal at np 1, np 2 and on the emulator, and later losses within the
# drift of the gradient's summation order (1e-3 relative; this net amplifies it); a run stopped after step 2 and
# resumed logs the uninterrupted run's losses (the same draws again); --model.stochastic_depth 0 gives another
# first loss (the draws did something). config.ini records the option.
source "$(dirname "$0")/lib.bash"
train() {  # train NAME NP ARGS...: a loss per step in $E2E_TMP/NAME/metrics.jsonl
  local name=$1 np=$2 run="$E2E_TMP/$1"
  shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" --model efficientnet_b0 --data.synthetic 64x32x32x3:10 --data.test "" \
    --train.batch 16 --train.max_steps 4 --bn.group_size 8 --train.lr 0.01 --seed 5 --log.every_steps 1 \
    --log.tensorboard false --checkpoint.at_end false --run-dir "$run" "$@" >> "$run.log" 2>&1 ||
    fail "$name failed:\n$(tail -20 "$run.log")"
}
train np1 1
train np2 2
train emu 1 --device emu --train.max_steps 1
train off 1 --model.stochastic_depth 0
train cut 1 --train.stop_at_step 2
train cut 1 --resume auto
grep -q '^stochastic_depth = 0.2$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks [model] stochastic_depth"
$PY - "$E2E_TMP"/{np1,np2,emu,off,cut}/metrics.jsonl <<'PY' || fail "stochastic depth's losses differ"
import json, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
one, two, emu, off, cut = map(losses, sys.argv[1:])
assert len(one) == len(two) == len(off) == len(cut) == 4 and len(emu) == 1, (one, two, emu, off, cut)
rel = lambda a, b: abs(a - b) / abs(b)
assert rel(two[0], one[0]) <= 1e-6, f"first loss at np 2 {two[0]} vs np 1 {one[0]}"
assert rel(emu[0], one[0]) <= 1e-5, f"first loss on emu {emu[0]} vs cpu {one[0]}"
drift = max(rel(a, b) for a, b in zip(two, one))
assert drift <= 1e-3, f"np 2 losses {two} vs np 1 {one}: {drift:.1e} relative > 1e-3"
assert cut == one, f"stopped after step 2 and resumed: {cut} vs uninterrupted {one}"
assert rel(off[0], one[0]) > 1e-3, f"first loss {one[0]} equals the one without stochastic depth {off[0]}"
print(f"ok: efficientnet_b0 with stochastic depth: first loss {one[0]:.6f} at np 1, np 2 and emu (without: "
      f"{off[0]:.6f}); np 2 within {drift:.1e}; the resumed run's losses equal the uninterrupted run's")
PY
