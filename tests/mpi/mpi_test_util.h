// Helpers shared by the MPI tests.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "src/comm/comm.h"

namespace cnn {
namespace test {

// Every rank's values are rank 0's, bit for bit (a failure names this rank and `what`).
inline void expect_same_on_every_rank(const std::vector<float>& mine, const char* what) {
  std::vector<float> root = mine;
  broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), mine.data(), mine.size() * sizeof(float)), 0)
      << what << ": rank " << world_rank() << " differs from rank 0";
}

}  // namespace test
}  // namespace cnn
