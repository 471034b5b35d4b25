#!/usr/bin/env bash
# Mixup and cutmix (--augment.mixup, --augment.cutmix; docs/data.md#mixup-and-cutmix) pair positions 2k, 2k+1
# of the global batch and key every draw by the global sample id: 8 steps of Fashion-MNIST at global batch 64
# (batch-norm groups of 32, so the statistics do not depend on the rank count either) give the same losses at
# np 1 and np 2, up to the summation order of the gradient (1e-5 relative), other losses than without mixing,
# and the same losses on the emulator's device path (upload_images + mix_images) as on the CPU's host path. A
# per-rank batch that would split a pair is refused with exit 2.
source "$(dirname "$0")/lib.bash"
train() {  # train NAME NP ARGS...: a loss per step in $E2E_TMP/NAME/metrics.jsonl
  local name=$1 np=$2 run="$E2E_TMP/$1"
  shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --data.test "" --train.batch 64 \
    --train.max_steps 8 --bn.group_size 32 --log.every_steps 1 --log.tensorboard false --checkpoint.at_end false \
    --run-dir "$run" "$@" > "$run.log" 2>&1 || fail "$name failed:\n$(tail -20 "$run.log")"
}
mix=(--augment.mixup 0.4 --augment.cutmix 1.0 --augment.switch_prob 0.5 --augment.mix_prob 0.9
     --train.label_smoothing 0.1)
train np1 1 "${mix[@]}"
train np2 2 "${mix[@]}"
train plain 1 --train.label_smoothing 0.1
train emu 1 "${mix[@]}" --device emu --train.max_steps 3
grep -q '^mixup = 0.4$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks augment.mixup"
grep -q '^cutmix = 1$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks augment.cutmix"
$PY - "$E2E_TMP"/{np1,np2,plain,emu}/metrics.jsonl <<'PY' || fail "mixed losses differ between np 1 and np 2 or emu"
import json, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
one, two, plain, emu = map(losses, sys.argv[1:])
assert len(one) == len(two) == len(plain) == 8 and len(emu) == 3, (one, two, plain, emu)
err = max(abs(a - b) / abs(b) for a, b in zip(one, two))
assert err <= 1e-5, f"np 1 losses {one} vs np 2 {two}: {err:.1e} relative > 1e-5"
assert abs(one[0] - plain[0]) > 1e-3, f"the first loss {one[0]} equals the unmixed {plain[0]}: nothing mixed?"
emu_err = max(abs(a - b) / abs(b) for a, b in zip(one, emu))
assert emu_err <= 1e-4, f"cpu losses {one[:3]} vs emu {emu}: {emu_err:.1e} relative > 1e-4"
print(f"ok: mixup + cutmix, np 1 and np 2: losses within {err:.1e}; emu within {emu_err:.1e}; unmixed first "
      f"loss {plain[0]:.4f} vs {one[0]:.4f}")
PY
expect_exit 2 "the per-rank batch must be even" -- "${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini \
  --data.test "" --train.batch 6 --augment.cutmix 1 --run-dir "$E2E_TMP/odd"
