// GoogleTest main for the suites run under mpirun -np 2 and -np 4. Rank 0 prints the usual report; every other
// rank prints its own failures (each assertion with file:line and the test's name, tagged "[rank r]"), so a
// check that fails on rank 3 alone is seen. A failure on any rank fails the job's exit code.
#include <gtest/gtest.h>

#include <cstdio>

#include "src/comm/comm.h"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "(unknown)",
                 r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed()) std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  cnn::comm_init(&argc, &argv);
  const int rank = cnn::world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  int worst = cnn::allreduce_max(rc);
  if (worst != 0 && rc == 0 && rank == 0) std::fprintf(stderr, "a test failed on another rank (its [rank r] lines above)\n");
  cnn::comm_finalize();
  return worst;
}
