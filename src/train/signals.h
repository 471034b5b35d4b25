// Stop signals. SIGUSR1 (Slurm's --signal=B:USR1@T) and SIGTERM (scancel, time limits, node drains) only set a
// flag; the trainer checks it once per step, all ranks agree on it with a one-int allreduce so they stop at the
// same step, write a checkpoint and exit 75. Repeated SIGUSR1/SIGTERM change nothing: schedulers and batch
// scripts often deliver the same stop twice (to the step and through srun), and killing the rank in the middle
// of its checkpoint would lose it. Only SIGKILL (the hard time limit) interrupts the write, and then the last
// committed checkpoint is still intact.
// SIGINT (Ctrl-C) stops the same way but exits 130, the shell's code for an interrupted program; a second SIGINT
// is a person who does not want to wait, so it exits 130 at once (the last committed checkpoint stays intact).
// A SIGINT that the process inherited ignored (`nohup`, a background job of a non-interactive shell) stays
// ignored, as for any Unix program. SIGPIPE is ignored: a write to a dead peer's socket then fails with EPIPE
// and is reported, instead of killing the rank silently.
// The stop signals are taken by one thread (sigwait); every other thread blocks them, because a handler that
// interrupts oneDNN's generated f32 GEMM corrupts the heap (signals.cpp).
#pragma once

namespace cnn {

// Exit code of a run stopped by Ctrl-C after writing its checkpoint (128 + SIGINT, as shells report it).
constexpr int kExitInterrupted = 130;

void install_stop_handlers();
// The first stop signal received (0 when none).
int stop_signal();
const char* signal_name(int sig);
// kExitInterrupted for SIGINT, kExitPreempted for the scheduler's signals.
int exit_code_for_signal(int sig);

}  // namespace cnn
