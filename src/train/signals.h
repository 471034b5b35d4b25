// Preemption signals. SIGUSR1 (Slurm's --signal=B:USR1@T) and SIGTERM (scancel, time limits, node drains)
// only set a flag; the trainer checks it once per step, all ranks agree on it with a one-int allreduce so
// they stop at the same step, write a checkpoint and exit 75. Repeated signals change nothing: schedulers and
// batch scripts often deliver the same stop twice (to the step and through srun), and killing the rank in the
// middle of its checkpoint would lose it. Only SIGKILL (the hard time limit) interrupts the write, and then the
// last committed checkpoint is still intact.
#pragma once

namespace cnn {

void install_stop_handlers();
// The first stop signal received (0 when none).
int stop_signal();
const char* signal_name(int sig);

}  // namespace cnn
