// The trainer's signal set-up: a write to a connection whose other end is gone must fail with EPIPE instead of
// killing the rank with SIGPIPE (a peer node that died mid-run; the cluster suite's test 4); stop signals that
// arrive while oneDNN's f32 GEMM runs leave the heap intact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "kernels/cpu/dnnl_ops.h"
#include "src/train/signals.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(Signals, WriteToAClosedPipeFailsWithEpipeInsteadOfKilling) {
  const int sigs[] = {SIGUSR1, SIGTERM, SIGINT, SIGPIPE};
  struct sigaction saved[4];
  for (int i = 0; i < 4; ++i) sigaction(sigs[i], nullptr, &saved[i]);
  install_stop_handlers();
  struct sigaction pipe_action = {};
  sigaction(SIGPIPE, nullptr, &pipe_action);
  EXPECT_EQ(pipe_action.sa_handler, SIG_IGN);

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  const char byte = 1;
  errno = 0;
  EXPECT_EQ(write(fds[1], &byte, 1), -1);  // without SIG_IGN the test process would die here
  EXPECT_EQ(errno, EPIPE);
  close(fds[1]);
  for (int i = 0; i < 4; ++i) sigaction(sigs[i], &saved[i], nullptr);
}

// oneDNN's generated f32 GEMM kernels point rsp into a heap buffer while they run (oneDNN issue 4845): a signal
// handler that interrupts them writes its frame there. With a plain SIGUSR1 handler, this loop (fc1 of fmnist_cnn
// through DnnlOps, SIGUSR1 to the process every 20 us) aborted with "free(): invalid pointer" in 4 of 4 runs on
// an AVX2 CPU; install_stop_handlers routes the stop signals to one thread that runs no such code.
TEST(Signals, StopSignalsDuringOneDnnGemmLeaveTheHeapIntact) {
  install_stop_handlers();
  DnnlOps ops(1);
  const int n = 32, in = 1568, out = 128;
  const auto x = test::random_vec(static_cast<size_t>(n) * in, 1);
  const auto w = test::random_vec(static_cast<size_t>(in) * out, 2);
  std::vector<float> y(static_cast<size_t>(n) * out), first;
  std::atomic<bool> done{false};
  std::atomic<long> sent{0};
  const pid_t pid = getpid();
  std::thread sender([&] {
    while (!done) {
      kill(pid, SIGUSR1);
      ++sent;
      usleep(20);
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  long calls = 0;
  while (std::chrono::steady_clock::now() < until) {
    ops.linear_forward(DType::kF32, n, in, out, x.data(), w.data(), nullptr, y.data());
    std::vector<float> traffic(1000 + calls % 5000, 1.f);  // allocations between the calls, as a step makes
    if (first.empty()) first = y;
    ASSERT_EQ(y, first) << "call " << calls;
    ++calls;
  }
  done = true;
  sender.join();
  EXPECT_GT(sent.load(), 1000);
  EXPECT_GT(calls, 100);
  EXPECT_EQ(stop_signal(), SIGUSR1);
}

}  // namespace
}  // namespace cnn
