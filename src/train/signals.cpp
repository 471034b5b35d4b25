#include "src/train/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>

#include "src/base/error.h"

namespace cnn {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_interrupts = 0;
sigset_t g_stop_set;

// Async-signal-safe (write(2), _exit(2)): it runs as the handler, or on the signal thread below.
void note_stop_signal(int sig) {
  if (sig == SIGINT && ++g_interrupts > 1) {
    static const char msg[] = "\ncnntrain: second SIGINT: exiting now without a checkpoint (exit 130; the last "
                              "committed checkpoint is intact)\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(kExitInterrupted);
  }
  if (g_signal == 0) g_signal = sig;
}

extern "C" void on_stop_signal(int sig) { note_stop_signal(sig); }

// The one thread that takes the stop signals: every other thread blocks them (see install_stop_handlers).
extern "C" void* stop_signal_thread(void*) {
  for (;;) {
    int sig = 0;
    if (sigwait(&g_stop_set, &sig) == 0) note_stop_signal(sig);
  }
  return nullptr;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigemptyset(&g_stop_set);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaddset(&g_stop_set, SIGUSR1);
  sigaction(SIGTERM, &sa, nullptr);
  sigaddset(&g_stop_set, SIGTERM);
  struct sigaction old = {};
  sigaction(SIGINT, nullptr, &old);
  if (old.sa_handler != SIG_IGN) {
    sigaction(SIGINT, &sa, nullptr);
    sigaddset(&g_stop_set, SIGINT);
  }
  // A handler runs on the stack of the thread the signal interrupts. oneDNN's generated f32 GEMM kernels (2.x, up
  // to 3.11.1: oneDNN issue 4845) point rsp into a heap buffer while they run, so a handler that interrupts them
  // writes its frame into the heap: "corrupted size vs. prev_size" and SIGABRT a few calls later (seen in the
  // SIGINT and Slurm preemption tests on an AVX2 CPU, where matmul uses those kernels). So the stop signals are
  // blocked here, first thing in main, and in every thread started from here on (MPI's, OpenMP's, the loader),
  // and one thread takes them with sigwait. The handlers stay for a thread that somehow does not block them.
  static bool routed = false;
  if (!routed) {
    sigset_t previous;
    pthread_sigmask(SIG_BLOCK, &g_stop_set, &previous);
    pthread_t thread;
    if (pthread_create(&thread, nullptr, stop_signal_thread, nullptr) == 0) {
      pthread_detach(thread);
      routed = true;
    } else {
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);  // no thread: the handlers take them, as before
    }
  }
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
