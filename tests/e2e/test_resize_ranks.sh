#!/usr/bin/env bash
# --data.image_size on an HDF5 set (docs/data.md#resizing): Fashion-MNIST, stored 28x28, trained at 32x32
# (random-resized crop + flip) and evaluated at 32x32 (Resize(37) + CenterCrop(32)). The crops are keyed by
# the global sample id: 8 steps at global batch 64 (batch-norm groups of 32) give the same losses at np 1 and
# np 2, up to the summation order of the gradient (1e-5 relative); the 10000 test images are evaluated at
# 32x32 (the test losses are not compared: batch-norm running statistics depend on the rank count). The stored
# size asked for
# explicitly (--data.image_size 28x28) reads the set as stored: the same losses, bit for bit, as without the
# option.
source "$(dirname "$0")/lib.bash"
train() {  # train NAME NP ARGS...: 8 steps and an evaluation, in $E2E_TMP/NAME/metrics.jsonl
  local name=$1 np=$2 run="$E2E_TMP/$1"
  shift 2
  "${MPIRUN[@]}" "$np" "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.batch 64 --train.max_steps 8 \
    --bn.group_size 32 --log.every_steps 1 --log.tensorboard false --checkpoint.at_end false \
    --run-dir "$run" "$@" > "$run.log" 2>&1 || fail "$name failed:\n$(tail -20 "$run.log")"
}
train np1 1 --data.image_size 32x32
train np2 2 --data.image_size 32x32
train plain 1
train stored 1 --data.image_size 28x28
short=(--train.batch 16 --train.max_steps 3 --bn.group_size 0 --data.test "" --data.image_size 32x32 --augment.rotate 10)
train cpu 1 "${short[@]}" --device cpu
train emu 1 "${short[@]}" --device emu
grep -q '^image_size = 32x32$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks data.image_size"
grep -q '^rrc_scale = 0.08,1$' "$E2E_TMP/np1/config.ini" || fail "config.ini lacks augment.rrc_scale"
$PY - "$E2E_TMP"/{np1,np2,plain,stored,cpu,emu}/metrics.jsonl <<'PY' || fail "resized runs differ between np 1 and np 2"
import json, sys
def events(p, kind):
    return [e for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == kind]
def losses(p):
    return [e["loss"] for e in events(p, "train")]
one, two, plain, stored, cpu, emu = map(losses, sys.argv[1:])
assert len(one) == len(two) == len(plain) == 8, (one, two, plain)
err = max(abs(a - b) / abs(b) for a, b in zip(one, two))
assert err <= 1e-5, f"np 1 losses {one} vs np 2 {two}: {err:.1e} relative > 1e-5"
ev = events(sys.argv[1], "eval")[-1]
assert ev["count"] == 10000 and ev["test_acc"] > 0.15, f"evaluation at 32x32: {ev}"
assert abs(one[0] - plain[0]) > 1e-4, f"the first loss {one[0]} equals the unresized {plain[0]}: nothing resized?"
assert stored == plain, f"--data.image_size 28x28 (the stored size) changed the losses: {stored} vs {plain}"
assert len(cpu) == len(emu) == 3, (cpu, emu)
dev = max(abs(a - b) / abs(b) for a, b in zip(emu, cpu))
assert dev <= 1e-4, f"--device emu losses {emu} vs cpu {cpu}: {dev:.1e} relative > 1e-4"
print(f"ok: 28x28 -> 32x32, np 1 and np 2: losses within {err:.1e}, test accuracy {ev['test_acc']:.4f}; the stored "
      f"size asked for gives the unresized losses bit for bit; device input path within {dev:.1e} of the host's")
PY
