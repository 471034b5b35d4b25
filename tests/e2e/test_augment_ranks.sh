#!/usr/bin/env bash
# Rotation and colour jitter (--augment.rotate, --augment.color_jitter; docs/data.md#augmentation) are keyed by
# the global sample id: 8 steps of Fashion-MNIST at global batch 64 (batch-norm groups of 32, so the statistics
# do not depend on the rank count either) give the same losses at np 1 and np 2, up to the summation order of
# the gradient (1e-5 relative), and other losses than without the augmentation.
source "$(dirname "$0")/lib.bash"
train() {  # train NAME NP ARGS...: 8 steps, a loss per step in $E2E_TMP/NAME/metrics.jsonl
  local name=$1 np=$2 run="$E2E_TMP/$1"
  shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --data.test "" --train.batch 64 \
    --train.max_steps 8 --bn.group_size 32 --log.every_steps 1 --log.tensorboard false --checkpoint.at_end false \
    --run-dir "$run" "$@" > "$run.log" 2>&1 || fail "$name failed:\n$(tail -20 "$run.log")"
}
aug=(--augment.rotate 15 --augment.color_jitter 0.4,0.4,0.4)
train np1 1 "${aug[@]}"
train np2 2 "${aug[@]}"
train plain 1
grep -q '^rotate = 15$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks augment.rotate"
grep -q '^color_jitter = 0.4,0.4,0.4$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks augment.color_jitter"
$PY - "$E2E_TMP"/{np1,np2,plain}/metrics.jsonl <<'PY' || fail "augmented losses differ between np 1 and np 2"
import json, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
one, two, plain = map(losses, sys.argv[1:])
assert len(one) == len(two) == len(plain) == 8, (one, two, plain)
err = max(abs(a - b) / abs(b) for a, b in zip(one, two))
assert err <= 1e-5, f"np 1 losses {one} vs np 2 {two}: {err:.1e} relative > 1e-5"
assert abs(one[0] - plain[0]) > 1e-4, f"the first loss {one[0]} equals the unaugmented {plain[0]}: nothing augmented?"
print(f"ok: rotation and colour jitter, np 1 and np 2: losses within {err:.1e}; unaugmented first loss "
      f"{plain[0]:.4f} vs {one[0]:.4f}")
PY
