#!/usr/bin/env bash
# mpirun -np 2 on Fashion-MNIST (one epoch) must reach >= 85% test accuracy and write the run directory.
source "$(dirname "$0")/lib.bash"
run="$E2E_TMP/run"
"${MPIRUN[@]}" 2 "$BUILD/cnntrain" --config jobs/fashion_mnist.ini --train.epochs 1 --log.every_steps 200 \
  --run-dir "$run"
for f in config.ini log.txt metrics.jsonl; do [ -s "$run/$f" ] || fail "run directory lacks $f"; done
[ "$(json_field "$run/metrics.jsonl" start world_size)" = 2 ] || fail "start event world_size != 2"
[ "$(json_field "$run/metrics.jsonl" end status)" = completed ] || fail "end event status != completed"
acc=$(json_field "$run/metrics.jsonl" end final_test_acc)
$PY -c "import sys; sys.exit(0 if float('$acc') >= 0.85 else 1)" || fail "test accuracy $acc < 0.85"
# The resolved config reproduces the run's settings.
grep -q '^epochs = 1$' "$run/config.ini" || fail "config.ini lacks the command-line override"
echo "ok: Fashion-MNIST np=2 test accuracy $acc"
