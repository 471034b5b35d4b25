#!/usr/bin/env bash
# cnntrain-data plot on real short runs: one PNG per figure, each decoding to the documented 1000x600 pixels;
# two runs overlaid; a run still being written (a half line at the end) plots too; bad input exits 2.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
for seed in 1 2; do
  "${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.batch 64 --train.max_steps 40 \
    --log.every_steps 10 --seed $seed --eval.batch 500 --run-dir "$T/run$seed" > "$T/run$seed.log" 2>&1 ||
    { cat "$T/run$seed.log"; fail "training run $seed"; }
done
check_pngs() {  # check_pngs DIR: the six figures, decoded
  $PY - "$1" <<'PYEOF'
import os, sys
from PIL import Image
want = ["accuracy_epoch.png", "accuracy_step.png", "loss_epoch.png", "loss_step.png", "rank_breakdown.png",
        "throughput.png"]
got = sorted(os.listdir(sys.argv[1]))
assert got == want, got
for name in want:
    im = Image.open(os.path.join(sys.argv[1], name))
    im.load()  # decodes every pixel
    assert im.size == (1000, 600), (name, im.size)
    assert len(set(im.convert("L").getdata())) > 10, name + " is blank"
print("ok: %d PNGs of 1000x600 in %s" % (len(want), sys.argv[1]))
PYEOF
}
"$BUILD/cnntrain-data" plot "$T/run1" --out "$T/one" > "$T/plot1.log" || { cat "$T/plot1.log"; fail "plot"; }
check_pngs "$T/one" || fail "plot of one run"
"$BUILD/cnntrain-data" plot "$T/run1" "$T/run2" --out "$T/two" > /dev/null || fail "plot of two runs"
check_pngs "$T/two" || fail "overlay of two runs"
# A run in progress: metrics.jsonl ends in a line still being written.
mkdir -p "$T/live" && head -c -40 "$T/run1/metrics.jsonl" > "$T/live/metrics.jsonl"
"$BUILD/cnntrain-data" plot "$T/live" --out "$T/live_png" > /dev/null || fail "plot of a run in progress"
check_pngs "$T/live_png" || fail "plot of a run in progress"
expect_exit 2 "cannot read $T/none/metrics.jsonl" -- "$BUILD/cnntrain-data" plot "$T/none" --out "$T/x"
expect_exit 2 "the option '--out' is required" -- "$BUILD/cnntrain-data" plot "$T/run1"
