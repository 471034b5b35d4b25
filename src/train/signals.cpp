#include "src/train/signals.h"

#include <unistd.h>

#include <csignal>

#include "src/base/error.h"

namespace cnn {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_interrupts = 0;

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGINT && ++g_interrupts > 1) {
    // Only async-signal-safe calls here: write(2) and _exit(2).
    static const char msg[] = "\ncnntrain: second SIGINT: exiting now without a checkpoint (exit 130; the last "
                              "committed checkpoint is intact)\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(kExitInterrupted);
  }
  if (g_signal == 0) g_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction old = {};
  sigaction(SIGINT, nullptr, &old);
  if (old.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, nullptr);
  // A write to the socket of a peer whose node died raises SIGPIPE, whose default action kills this rank
  // before it can report which ranks were lost; ignored, the write fails with EPIPE, the transport closes the
  // connection and the collective timeout's report names the silent ranks and host (docs/slurm.md).
  signal(SIGPIPE, SIG_IGN);
}

int stop_signal() { return g_signal; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

int exit_code_for_signal(int sig) { return sig == SIGINT ? kExitInterrupted : kExitPreempted; }

}  // namespace cnn
