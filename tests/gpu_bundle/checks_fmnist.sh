# shellcheck shell=bash disable=SC2154  # cnntrain, work: set by run-gpu-checks.sh
# fmnist_cnn training checks of run-gpu-checks.sh (sourced by it; needs checks_lib.sh, $cnntrain, $work).
section "fmnist_cnn 200 steps: GPU-vs-GPU spread, --deterministic repeatability, --device cuda vs cpu (TF32 off)"
# SGD amplifies a difference in the last bits ~10x per 5 steps here (measured on an H100: two default cuda runs
# 2e-7 apart at step 20, 3e-4 at 40, 3e-2 at 60; cuda vs cpu 1e-6 at 20, 5e-3 at 40): past ~30 steps any two
# runs that sum in another order are different trajectories, and no bound on their losses says anything. The
# runs go 200 steps (bit-identical repeats, and the spread over 200 steps for the report); the cuda-vs-cpu
# comparison takes the first COMPARED steps.
COMPARED=20
common=(--config "$CNNTRAIN_BUNDLE/jobs/fashion_mnist.ini" --data.train "$CNNTRAIN_BUNDLE/data/fmnist_8k.h5"
        --data.test "" --train.batch 32 --log.every_steps 1 --checkpoint.at_end false --gpu.tf32 false --seed 7)
# worst_rel A B [N]: "STEPS WORST" over the per-step losses of two runs, the first N steps if given (WORST = inf
# when one is not finite).
worst_rel() {
  paste <(losses "$1" | head -n "${3:-1000000}") <(losses "$2" | head -n "${3:-1000000}") | awk '
    { n++; if ($1 == "" || $2 == "" || $1 + 0 != $1 || $2 + 0 != $2) { bad = 1; next }
      r = ($1 - $2) / ($2 == 0 ? 1 : $2); r = r < 0 ? -r : r; if (r > w) w = r }
    END { if (bad) print n, "inf"; else printf "%d %.3e\n", n, w }'
}
fmnist() { step "$1" "$2" "$cnntrain" "${common[@]}" --train.max_steps 200 --run-dir "$work/$1" "${@:3}"; }

fmnist fmnist-cuda-a 120 --device cuda
fmnist fmnist-cuda-b 120 --device cuda
fmnist fmnist-cuda-det-a 120 --device cuda --deterministic true
fmnist fmnist-cuda-det-b 120 --device cuda --deterministic true
fmnist fmnist-cpu-det 300 --device cpu --deterministic true --threads 8

# The spread: two default GPU runs differ only in the order of floating-point sums (atomics, split
# reductions), the same kind of difference that separates the GPU from the CPU; how far SGD amplifies it over the
# compared steps is what any cuda-vs-cpu bound must allow. The bound: 1e-4 relative over the first $COMPARED steps,
# widened to 5x the spread over those steps when the GPU's own noise would otherwise decide the verdict.
read -r n spread <<<"$(worst_rel "$work/fmnist-cuda-a" "$work/fmnist-cuda-b" "$COMPARED")"
read -r n200 spread200 <<<"$(worst_rel "$work/fmnist-cuda-a" "$work/fmnist-cuda-b")"
if [[ $n200 == 200 && $spread200 != inf ]]; then
  record fmnist-gpu-spread pass 0 "two default cuda runs, same seed: worst relative loss difference $spread over\
 the first $COMPARED steps, $spread200 over 200 (SGD's amplification)"
else
  record fmnist-gpu-spread fail 0 "needs two complete 200-step cuda runs (lines compared: ${n200:-0}; a run missing\
 or not finite)"
fi
if [[ -n $(losses "$work/fmnist-cuda-det-a") ]] &&
   cmp -s <(losses "$work/fmnist-cuda-det-a") <(losses "$work/fmnist-cuda-det-b"); then
  record fmnist-deterministic-repeat pass 0 "two --deterministic true cuda runs: identical losses"
else
  record fmnist-deterministic-repeat fail 0 "two --deterministic true cuda runs must give identical losses: $(
    worst_rel "$work/fmnist-cuda-det-a" "$work/fmnist-cuda-det-b" |
    awk '{ printf "%s lines, worst relative difference %s (inf: a run missing or not finite)", $1, $2 }')"
fi
tol=$(awk -v s="${spread:-inf}" 'BEGIN { t = 1e-4; if (s != "inf" && 5 * s > t) t = 5 * s; printf "%.3e", t }')
read -r n worst <<<"$(worst_rel "$work/fmnist-cuda-det-a" "$work/fmnist-cpu-det" "$COMPARED")"
first=$(paste <(losses "$work/fmnist-cuda-det-a" | head -1) <(losses "$work/fmnist-cpu-det" | head -1) |
        awk '{ r = ($1 - $2) / $2; printf "%.2e", r < 0 ? -r : r }')
if [[ $n == "$COMPARED" && $worst != inf ]] &&
   awk -v w="$worst" -v t="$tol" -v f="${first:-1}" 'BEGIN { exit !(w <= t && f <= 1e-4) }'; then
  record fmnist-cuda-vs-cpu pass 0 "first $COMPARED steps: worst relative difference $worst <= $tol (spread\
 $spread); step 1 $first <= 1e-4"
else
  record fmnist-cuda-vs-cpu fail 0 "${n:-0} lines compared ($COMPARED needed; inf: a run missing or not finite): worst\
 relative difference ${worst:-none} (bound $tol from the spread ${spread:-unmeasured}), step 1 ${first:-none}\
 (bound 1e-4: the first loss has no training behind it)"
fi

section "NVML: the GPU figures of the fmnist-cuda-a run (docs/observability.md)"
# Its last train event: utilisation 0-100 %, a plausible temperature, power drawn, and memory used by all
# processes (NVML) at least the arena's bytes in use and at most the total.
jfield() { sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" <<<"$1"; }
last=$(grep '"event":"train"' "$work/fmnist-cuda-a/metrics.jsonl" 2>/dev/null | tail -1)
verdict=$(awk -v u="$(jfield "$last" gpu_util_pct)" -v t="$(jfield "$last" gpu_temp_c)" -v p="$(jfield "$last" gpu_power_w)" \
    -v used="$(jfield "$last" gpu_mem_used)" -v total="$(jfield "$last" gpu_mem_total)" -v arena="$(jfield "$last" mem_in_use)" '
    BEGIN { printf "utilisation %s%%, temperature %s C, power %s W, memory used %s of %s bytes (arena in use %s)",
                   u, t, p, used, total, arena
            exit !(u != "" && t != "" && p != "" && used != "" && total != "" && arena != "" && u >= 0 && u <= 100 &&
                   t > 0 && t < 120 && p > 0 && used + 0 >= arena + 0 && used + 0 <= total + 0) }') && status=pass ||
  status=fail
record nvml-figures "$status" 0 "$verdict"

section "fmnist_cnn 20 steps in bf16 and fp16, cuDNN and the custom kernels (docs/mixed_precision.md, Tolerances)"
# The first loss (same weights and batch, no update yet) within one 16-bit rounding's reach of the fp32 GPU
# run's (3% bf16, 0.5% fp16); every loss within 20% of the fp32 CPU run's; all finite.
for impl in cudnn custom; do
  for prec in bf16 fp16; do
    name=fmnist-$prec-$impl
    step "$name" 120 "$cnntrain" "${common[@]}" --train.max_steps 20 --device cuda --conv.impl "$impl" \
      --precision "$prec" --run-dir "$work/$name" || continue
    first_rtol=$([[ $prec == bf16 ]] && echo 0.03 || echo 0.005)
    verdict=$(paste <(losses "$work/$name") <(losses "$work/fmnist-cuda-det-a" | head -20) \
                    <(losses "$work/fmnist-cpu-det" | head -20) | awk -v f="$first_rtol" '
        function rel(a, b) { r = (a - b) / (b == 0 ? 1 : b); return r < 0 ? -r : r }
        { n++; if ($1 + 0 != $1 || $2 + 0 != $2 || $3 + 0 != $3) { bad = 1; next }
          if (n == 1) first = rel($1, $2); d = rel($1, $3); if (d > worst) worst = d }
        END { printf "%d steps, first loss within %.1e of fp32 cuda (<= %s), every loss within %.1e of fp32 cpu" \
                     " (<= 0.2)%s", n, first, f, worst, bad ? ", NOT FINITE (or a reference run missing)" : ""
              exit !(n == 20 && !bad && first <= f && worst <= 0.2) }') && status=pass || status=fail
    record "$name-losses" "$status" 0 "$verdict"
  done
done
