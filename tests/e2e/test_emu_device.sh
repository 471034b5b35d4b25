#!/usr/bin/env bash
# --device emu (the CUDA backend's kernels under the SIMT emulator) trains Fashion-MNIST with the same
# per-step losses as --device cpu, within 1e-4 relative, for 20 steps in one process and under mpirun -np 2;
# --device cuda without a GPU driver fails with a clear message instead of crashing, in one process and at
# np 2 (multi-rank GPU runs are accepted: they go through NCCL).
source "$(dirname "$0")/lib.bash"
# No test set: evaluating 10000 images under the emulator would take minutes.
args=(--config jobs/fashion_mnist.ini --data.test "" --train.max_steps 20 --train.batch 8 --log.every_steps 1
      --train.label_smoothing 0.1 --train.nesterov true --checkpoint.at_end false)

compare() {  # compare RUN_A RUN_B: per-step train losses within 1e-4 relative
  $PY - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def losses(p):
    return [e["loss"] for e in map(json.loads, filter(str.strip, open(p))) if e["event"] == "train"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 20, f"expected 20 train events, got {len(a)} and {len(b)}"
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert worst <= 1e-4, f"losses differ by {worst:.2e} relative:\n{a}\n{b}"
print(f"ok: 20 losses agree within {worst:.1e} relative (first {b[0]:.4f}, last {b[-1]:.4f})")
PY
}

for np in 1 2; do
  for dev in cpu emu; do
    run="$E2E_TMP/$dev-np$np"
    if [ $np = 1 ]; then
      "$BUILD/cnntrain" "${args[@]}" --device $dev --run-dir "$run" >/dev/null
    else
      "${MPIRUN[@]}" $np "$BUILD/cnntrain" "${args[@]}" --device $dev --run-dir "$run" >/dev/null
    fi
    [ "$(json_field "$run/metrics.jsonl" start device)" = $dev ] || fail "start event device != $dev"
    [ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "$dev np=$np did not complete"
  done
  compare "$E2E_TMP/emu-np$np" "$E2E_TMP/cpu-np$np" || fail "--device emu and cpu disagree with np=$np"
done

# Built with CUDA (USE_CUDA): the missing driver is reported (exit 1); built without: the option is refused (2).
# With two ranks too: a multi-rank --device cuda run is accepted and gets as far as looking for its GPU.
if ! nvidia-smi >/dev/null 2>&1; then
  for np in 1 2; do
    rc=0
    out=$(timeout 60 "${MPIRUN[@]}" $np "$BUILD/cnntrain" "${args[@]}" --device cuda \
          --run-dir "$E2E_TMP/cuda$np" 2>&1) || rc=$?
    case "$rc:$out" in
      *"multi-rank"*) fail "--device cuda at np=$np was refused as multi-rank:\n$out" ;;
      1:*"no usable GPU"* | 2:*"built without CUDA"*)
        echo "ok: --device cuda at np=$np without a GPU: exit $rc, $(grep -m1 -o 'error[^:]*: .*' <<<"$out")" ;;
      *) fail "--device cuda at np=$np without a GPU: exit $rc (want 1 or 2 with a message):\n$out" ;;
    esac
  done
fi
