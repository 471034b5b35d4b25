#!/usr/bin/env bash
# The version a binary reports names the commit it was built from: `cnntrain --version` and the start event of
# metrics.jsonl say `git describe --always --dirty` of this checkout ("unknown" outside a git checkout). The
# Makefile's $(BUILD)/git_version stamp rebuilds the string whenever that changes; before it, a binary kept the
# commit of its first build, and runs recorded a commit they did not run.
source "$(dirname "$0")/lib.bash"
T=$E2E_TMP
desc=$(git describe --always --dirty 2>/dev/null || echo unknown)
want="cnntrain 0.1.0 ($desc)"
got=$("$BUILD/cnntrain" --version)
[ "$got" = "$want" ] ||
  fail "cnntrain --version says '$got', want '$want' (a stale build: run make, which rebuilds the version string)"
[ "$(cat "$BUILD/git_version" 2>/dev/null)" = "$desc" ] || fail "$BUILD/git_version does not hold '$desc'"
echo "ok: --version: $got"
"$BUILD/cnntrain" --model fmnist_cnn --data.synthetic 64x28x28x1:10 --data.test "" --train.batch 32 \
  --train.max_steps 1 --run-dir "$T/run" --log.tensorboard false > "$T/run.log" 2>&1 ||
  { cat "$T/run.log"; fail "run"; }
[ "$(json_field "$T/run/metrics.jsonl" start version)" = "$want" ] || fail "metrics.jsonl's start event: version \
'$(json_field "$T/run/metrics.jsonl" start version)', want '$want'"
grep -qF "$want" "$T/run.log" || fail "the log does not name the version '$want'"
echo "ok: the run's metrics.jsonl and log name the same version"
