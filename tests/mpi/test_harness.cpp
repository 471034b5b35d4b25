// The MPI test harness itself (tests/mpi/mpi_main.cpp): a failure on a rank other than 0 must reach the output.
// Disabled: `make test-mpi-harness` runs it on purpose and expects the job to fail with rank 1's message.
#include <gtest/gtest.h>

#include "src/comm/comm.h"

namespace {

TEST(MpiHarness, DISABLED_PlantedFailureOnRankOne) {
  if (cnn::world_rank() == 1) ADD_FAILURE() << "planted failure on rank 1 only";
}

}  // namespace
