# shellcheck shell=bash disable=SC2154  # cnntrain, work, gpus: set by run-gpu-checks.sh
# What users' runs rely on, on the GPU (sourced by run-gpu-checks.sh; needs checks_lib.sh, $cnntrain, $work, $gpus):
# a run stopped at a step and resumed ends with exactly the uninterrupted run's losses; a checkpoint evaluates
# (--eval-only) to the same loss and accuracy on cuda and on cpu; two ranks on one GPU are refused before any work
# with a message naming --gpu.share, and train with it (two GPUs or more: two ranks train, each on its own GPU).
# fmnist_cnn, batch 32, --deterministic true, TF32 off.
section "runs: exact resume, --eval-only cuda vs cpu, two ranks (fmnist_cnn, --deterministic)"
base=(--config "$CNNTRAIN_BUNDLE/jobs/fashion_mnist.ini" --data.train "$CNNTRAIN_BUNDLE/data/fmnist_8k.h5"
      --train.batch 32 --log.every_steps 1 --seed 7 --deterministic true --gpu.tf32 false --train.max_steps 60)
run=("${base[@]}" --data.test "")
# eval_of DIR: "LOSS ACC" of the last eval event in DIR's metrics.
eval_of() {
  grep '"event":"eval"' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 |
    sed -n 's/.*"test_loss":\([-0-9.eE+]*\).*"test_acc":\([-0-9.eE+]*\).*/\1 \2/p'
}

step run-whole 120 "$cnntrain" "${run[@]}" --device cuda --run-dir "$work/run-whole"
step run-stopped 120 "$cnntrain" "${run[@]}" --device cuda --run-dir "$work/run-parts" --train.stop_at_step 30 &&
  step run-resumed 120 "$cnntrain" "${run[@]}" --device cuda --run-dir "$work/run-parts" --resume auto
whole=$(losses "$work/run-whole" | wc -l) parts=$(losses "$work/run-parts" | wc -l)
if ((whole == 60)) && cmp -s <(losses "$work/run-whole") <(losses "$work/run-parts"); then
  record resume-exact pass 0 "stopped at step 30, resumed to 60: all 60 losses identical to the uninterrupted run's"
else
  record resume-exact fail 0 "the stopped-and-resumed run's losses ($parts lines) are not the uninterrupted run's\
 ($whole lines, 60 expected): $(cmp <(losses "$work/run-whole") <(losses "$work/run-parts") 2>&1 |
    head -n 1)"
fi

ckpt=$(ls "$work/run-parts/checkpoints"/ckpt-*.h5 2>/dev/null | tail -n 1)
for device in cuda cpu; do
  step "eval-$device" 120 "$cnntrain" "${base[@]}" --device "$device" --eval-only --resume "${ckpt:-none}" \
    --data.test "$CNNTRAIN_BUNDLE/data/fmnist_8k.h5" --run-dir "$work/eval-$device"
done
read -r loss_gpu acc_gpu <<<"$(eval_of "$work/eval-cuda")"
read -r loss_cpu acc_cpu <<<"$(eval_of "$work/eval-cpu")"
if [[ -n $loss_gpu && -n $loss_cpu ]] && awk -v a="$loss_gpu" -v b="$loss_cpu" -v x="$acc_gpu" -v y="$acc_cpu" \
     'BEGIN { r = (a - b) / b; r = r < 0 ? -r : r; exit !(x == y && r <= 1e-5) }'; then
  record eval-cuda-vs-cpu pass 0 "the step-60 checkpoint: accuracy $acc_gpu on both, test loss $loss_gpu (cuda) and\
 $loss_cpu (cpu)"
else
  record eval-cuda-vs-cpu fail 0 "the step-60 checkpoint must give the same accuracy and a loss within 1e-5 on cuda\
 and cpu: cuda '${acc_gpu:-none}' '${loss_gpu:-none}', cpu '${acc_cpu:-none}' '${loss_cpu:-none}'"
fi

# Two ranks through the bundle's mpirun (root needs Open MPI's consent; more ranks than cores are fine).
mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$CNNTRAIN_BUNDLE/bin/mpirun" -np 2 --oversubscribe)
two=("$cnntrain" "${run[@]}" --device cuda --train.max_steps 20)
if (($(wc -l <<<"$gpus") >= 2)); then
  step two-ranks 180 "${mpi[@]}" "${two[@]}" --run-dir "$work/two-ranks" &&
    { [[ $(losses "$work/two-ranks" | wc -l) == 20 ]] ||
      record two-ranks-losses fail 0 "20 train events expected in $work/two-ranks/metrics.jsonl"; }
else
  # Refused at start-up (exit 2), naming the way out; then trained that way.
  # shellcheck disable=SC2016  # expanded by the inner bash
  step two-ranks-one-gpu-refused 120 bash -c 'out=$("$@" 2>&1); rc=$?; echo "$out"; echo "exit $rc"
    [[ $rc == 2 && $out == *"--gpu.share true"* ]]' refused "${mpi[@]}" "${two[@]}" --run-dir "$work/two-refused"
  step two-ranks-gpu-share 180 "${mpi[@]}" "${two[@]}" --gpu.share true --run-dir "$work/two-shared" &&
    { [[ $(losses "$work/two-shared" | wc -l) == 20 ]] ||
      record two-ranks-gpu-share-losses fail 0 "20 train events expected in $work/two-shared/metrics.jsonl"; }
fi
