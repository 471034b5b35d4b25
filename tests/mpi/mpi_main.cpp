// GoogleTest main for the suites run under mpirun -np 2 and -np 4. Only rank 0 prints results; a failure on
// any rank fails the job's exit code.
#include <gtest/gtest.h>

#include "src/comm/comm.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  cnn::comm_init(&argc, &argv);
  if (cnn::world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = cnn::allreduce_max(rc);
  if (worst != 0 && rc == 0 && cnn::world_rank() == 0) std::fprintf(stderr, "a test failed on another rank\n");
  cnn::comm_finalize();
  return worst;
}
