// The trainer's signal set-up: a write to a connection whose other end is gone must fail with EPIPE instead of
// killing the rank with SIGPIPE (a peer node that died mid-run; the cluster suite's test 4).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "src/train/signals.h"

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

}  // namespace
}  // namespace cnn
