#!/usr/bin/env bash
# The benchmarks refuse bad arguments at once, naming the option and what they expected (exit 2): a misspelt
# model used to fail only after the models before it had been measured (minutes of `make bench`), a bad number
# ended in an uncaught std::stoi exception, and an empty list in undefined behaviour.
source "$(dirname "$0")/lib.bash"
B=$BUILD/bench
for p in train_bench recompute_bench comm_bench; do
  [ -x "$B/$p" ] || fail "$B/$p is missing: make $B/$p (make test builds it)"
done
TB=("$B/train_bench" --torch none)
expect_exit 2 "--models: unknown benchmark model 'resnet2' (known: resnet20," -- "${TB[@]}" --models resnet20,resnet2
expect_exit 2 "--models: bad value ',': expected a comma-separated list" -- "${TB[@]}" --models ,
expect_exit 2 "--reps: bad value 'x': expected a whole number from 1" -- "${TB[@]}" --reps x
expect_exit 2 "--batch: bad value '1.5': expected a whole number from 0" -- "${TB[@]}" --batch 1.5
expect_exit 2 "--seconds: bad value '0': expected a number from 0.01" -- "${TB[@]}" --seconds 0
expect_exit 2 "--threads: bad value 'y': expected a whole number from 1" -- "${TB[@]}" --threads 2,y
expect_exit 2 "--torch-threads: bad value ',': expected a comma-separated list" -- "${TB[@]}" --torch-threads ,
expect_exit 2 "--reps needs a value" -- "${TB[@]}" --reps
# Refused before anything was measured: no CPU line, no peak, no repetition.
out=$("${TB[@]}" --models resnet20,resnet2 2>&1) && fail "train_bench accepted resnet2"
! grep -q "FP32 peak\|rep 0" <<<"$out" || fail "train_bench measured before refusing a model:\n$out"
echo "ok: train_bench refuses a misspelt model before measuring anything"

RB=("$B/recompute_bench")
expect_exit 2 "bad item 'resnet20': expected MODEL:BATCH:SIDE" -- "${RB[@]}" --models resnet20
expect_exit 2 "--models: unknown model 'foo'" -- "${RB[@]}" --models resnet20:8:32,foo:8:32
expect_exit 2 "BATCH: bad value 'x': expected a whole number from 1" -- "${RB[@]}" --models resnet20:x:32
expect_exit 2 "--pairs: bad value '0'" -- "${RB[@]}" --pairs 0
expect_exit 2 "--threads needs a value" -- "${RB[@]}" --threads
out=$("${RB[@]}" --models resnet20:8:32,foo:8:32 2>&1) && fail "recompute_bench accepted foo"
! grep -q "img/s" <<<"$out" || fail "recompute_bench measured resnet20 before refusing foo:\n$out"

CB=("${MPIRUN[@]}" 2 "$B/comm_bench")
expect_exit 2 "comm_bench: --models: unknown model 'foo'" -- "${CB[@]}" --models resnet20,foo
expect_exit 2 "comm_bench: --steps: bad value '-3'" -- "${CB[@]}" --steps -3
expect_exit 2 "comm_bench: unknown option --bogus" -- "${CB[@]}" --bogus 1
echo "test_bench_args: OK"
