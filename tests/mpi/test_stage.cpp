// Node-local staging (io/stage.h) under mpirun: one copy per node, made by node-local rank 0, and every rank
// gets the same staged path; a failure on the node is the same data error on every rank of it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "io/stage.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

std::string shared_dir(test::TempDir& mine) {
  std::string d = mine.path();
  broadcast(d, 0);
  return d;
}

TEST(StageMpi, OneCopyPerNodeAndEveryRankReadsIt) {
  test::TempDir mine;
  const std::string dir = shared_dir(mine);
  if (world_rank() == 0) std::ofstream(dir + "/train.h5") << std::string(100000, 'x');
  barrier();
  const StageResult r = stage_for_node(dir + "/train.h5", dir + "/stage", "train");
  int64_t copies = r.copied ? 1 : 0;
  allreduce_sum(&copies, 1);
  EXPECT_EQ(copies, num_nodes()) << "exactly one rank per node copies";
  EXPECT_EQ(r.copied, local_rank() == 0);
  struct stat st {};
  ASSERT_EQ(::stat(r.path.c_str(), &st), 0) << r.path << " must exist on rank " << world_rank();
  EXPECT_EQ(st.st_size, 100000);
  barrier();
}

TEST(StageMpi, AFailureOnTheNodeIsADataErrorOnEveryRank) {
  test::TempDir mine;
  const std::string dir = shared_dir(mine);
  if (world_rank() == 0) {
    std::ofstream(dir + "/train.h5") << "data";
    std::ofstream(dir + "/file");
  }
  barrier();
  int code = 0;
  std::string msg;
  try {
    stage_for_node(dir + "/train.h5", dir + "/file/stage", "train");
  } catch (const Error& e) {
    code = e.code();
    msg = e.what();
  }
  EXPECT_EQ(code, kExitData) << "rank " << world_rank() << " must fail too";
  EXPECT_NE(msg.find(dir + "/file/stage"), std::string::npos) << msg;
  barrier();
}

}  // namespace
}  // namespace cnn
