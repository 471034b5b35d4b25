#!/usr/bin/env bash
# Sums a kernel trace (libcnntrain-ktrace.so, tests/gpu_bundle/kernel_trace.c) per training step: GPU time by kind
# of work and the heaviest kernels, averaged over the steps after the first SKIP (default 6: cuDNN's choices,
# the arena's growth and the clocks settle in the first steps). A step runs from one input-preparation kernel
# (prepare_images_kernel, once per step in cnntrain) to the next, so the last step traced is not counted.
#   kernel_time.sh TRACE [SKIP [TOP]]        (plain bash, awk, sort; c++filt when present for readable names)
# Prints the table; exit 1 (with the reason) when the trace holds fewer than two steps after SKIP or lost records.
set -euo pipefail
trace=$1 skip=${2:-6} top=${3:-15}
[[ -r $trace ]] || { echo "kernel_time.sh: cannot read the trace '$trace'" >&2; exit 1; }
if grep -q '^# dropped' "$trace"; then
  echo "kernel_time.sh: $trace: CUPTI dropped records ($(grep '^# dropped' "$trace" | head -n 1 | cut -c3-)):" \
    "the sums would be short" >&2
  exit 1
fi
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }
# Records by start time (CUPTI writes them per buffer, not in order), names demangled: "start end name...".
# CUPTI's timestamps are ns since the epoch (19 digits), past the 2^53 that awk's doubles hold exactly: they
# are taken relative to the first record's, split at the 15th digit from the right so every step stays exact.
grep '^[KCS] ' "$trace" | awk '
function rel(t, l) { l = length(t); return (substr(t, 1, l - 15) - p0) * 1e15 + substr(t, l > 15 ? l - 14 : 1) }
{ n = ($1 == "K") ? substr($0, index($0, $5)) : ($1 == "C" ? "[memcpy]" : "[memset]")
  if (NR == 1) p0 = substr($2, 1, length($2) - 15) + 0
  printf "%.0f %.0f %s\n", rel($2), rel($3), n }' | sort -n -k1,1 | demangle |
awk -v skip="$skip" -v top="$top" -v trace="$trace" '
function kind(n, l) {
  l = tolower(n)
  if (l ~ /^\[mem/) return "copies and fills"
  if (l ~ /cnn::gpu::/ || l ~ /3cnn3gpu/) {
    if (l ~ /batchnorm|channel_sums/) return "batch norm (custom)"
    if (l ~ /conv|gemm|wmma|linear/) return "convolution/matmul (custom)"
    if (l ~ /pool/) return "pooling"
    if (l ~ /axpy|add|join/) return "adds (residual, gradients)"
    if (l ~ /sgd|adam|optim|update/) return "optimizer"
    return "other (custom)"
  }
  if (l ~ /bn_fw|bn_bw|batchnorm|batch_norm/) return "batch norm (cuDNN)"
  return "convolution/matmul (cuDNN, cuBLASLt)"
}
# Fills keys[1..] with the keys of vals, largest value first; returns their count.
function by_value(vals, keys, m, k, i, j, t) {
  m = 0; for (k in vals) keys[++m] = k
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (vals[keys[j]] > vals[keys[i]]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
  return m
}
{ start = $1; end = $2; name = substr($0, length($1) + length($2) + 3)
  if (name ~ /prepare_images_kernel/) { marks++; if (marks == skip + 1) t0 = start; if (marks > skip + 1) { t1 = start; steps = marks - skip - 1 } }
  if (marks < skip + 1) next
  n++; S[n] = start; E[n] = end; N[n] = name }
END {
  if (steps < 1) { printf "kernel_time.sh: %s: %d steps traced (prepare_images_kernel), need at least %d to skip %d and sum one: trace more steps (--train.max_steps) or give a smaller SKIP\n", trace, marks, skip + 2, skip > "/dev/stderr"; exit 1 }
  for (i = 1; i <= n; i++) {
    if (S[i] >= t1) break
    d = (E[i] - S[i]) / 1e6; total += d; bykind[kind(N[i])] += d; byname[N[i]] += d; calls[N[i]]++
    if (i == 1 || S[i] > cur_e) { if (i > 1) busy += cur_e - cur_s; cur_s = S[i]; cur_e = E[i] } else if (E[i] > cur_e) cur_e = E[i]
  }
  busy += cur_e - cur_s
  span = (t1 - t0) / 1e6
  printf "steps %d-%d (%d), %.1f ms per step: GPU busy %.1f ms (%.0f%%), kernel time %.1f ms\n", skip + 1, skip + steps, steps, span / steps, busy / 1e6 / steps, 100 * busy / 1e6 / span, total / steps
  printf "  %-40s %9s\n", "kind of work", "ms/step"
  m = by_value(bykind, K)
  for (i = 1; i <= m; i++) printf "  %-40s %9.2f\n", K[i], bykind[K[i]] / steps
  printf "  heaviest kernels: ms/step, calls/step, us/call, name\n"
  m = by_value(byname, L)
  for (i = 1; i <= m && i <= top; i++)
    printf "  %8.2f %6.1f %9.1f  %s\n", byname[L[i]] / steps, calls[L[i]] / steps, 1000 * byname[L[i]] / calls[L[i]], substr(L[i], 1, 150)
}'
