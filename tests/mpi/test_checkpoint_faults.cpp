// Collective error paths of checkpoint writes and reads: a failure on one rank (injected through the test
// hooks of src/checkpoint/fault_injection.h, after the real HDF5 call) makes every rank leave together,
// with the same CollectiveError (exit code 4) naming that rank; no .tmp is left, and the previous
// checkpoint stays intact and readable. Under mpirun -np 2 and -np 4; a hang fails the suite's time limit.
#include <sys/stat.h>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/checkpoint/fault_injection.h"
#include "src/comm/comm.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// A small "model": ragged shapes, some with fewer rows than ranks (empty shares).
struct Model {
  std::vector<std::vector<float>> data;
  std::vector<CheckpointArray> arrays;
  explicit Model(uint64_t seed) {
    const std::vector<std::vector<int>> shapes = {{5, 3}, {7}, {1}, {2, 2, 2}};
    const char* names[] = {"params/a.weight", "params/a.bias", "buffers/b.scale", "optimizer/momentum/a.weight"};
    for (size_t i = 0; i < shapes.size(); ++i) {
      size_t n = 1;
      for (int d : shapes[i]) n *= d;
      data.push_back(test::random_vec(n, seed + i));
      arrays.push_back({names[i], shapes[i], data.back().data()});
    }
  }
};

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// One directory on the shared file system, named by rank 0.
std::string shared_dir(test::TempDir& mine) {
  std::string d = mine.path();
  broadcast(d, 0);
  return d;
}

CheckpointMeta meta(int64_t step) {
  CheckpointMeta m;
  m.step = step;
  m.world_size = world_size();
  m.model = "test";
  return m;
}

bool same_on_all_ranks(const std::string& s) {
  std::string root = s;
  broadcast(root, 0);
  return allreduce_min(root == s ? 1 : 0) == 1;
}

class CheckpointFaults : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = shared_dir(tmp_); }
  void TearDown() override {
    set_ckpt_fault("");
    barrier();  // rank 0 removes the directory only when every rank is done with it
  }
  test::TempDir tmp_;
  std::string dir_;
};

TEST_F(CheckpointFaults, AWriteFailureOnOneRankEndsTheWriteOnEveryRank) {
  Model good(1);
  const std::string a = dir_ + "/" + checkpoint_name(1), b = dir_ + "/" + checkpoint_name(2);
  write_checkpoint(a, good.arrays, meta(1));
  const int last = world_size() - 1;
  // The model has 4 datasets (4 crc32 attributes) and the file 13 metadata attributes.
  const std::vector<std::string> faults = {
      "write:0:1", strprintf("write:%d:3", last), strprintf("write:%d:4", last),  // the last dataset
      "attr:0:2", strprintf("attr:%d:4", last), strprintf("attr:%d:11", last),     // a metadata attribute
  };
  for (const std::string& f : faults) {
    SCOPED_TRACE(f);
    set_ckpt_fault(f);
    const int rank = std::stoi(f.substr(f.find(':') + 1));
    Model other(100);
    std::string what;
    int code = 0;
    try {
      write_checkpoint(b, other.arrays, meta(2));
    } catch (const CollectiveError& e) {
      what = e.what();
      code = e.code();
    }
    EXPECT_EQ(code, kExitCheckpoint) << "rank " << world_rank() << " did not raise: " << what;
    EXPECT_NE(what.find(strprintf("rank %d on %s", rank, host_name().c_str())), std::string::npos) << what;
    EXPECT_NE(what.find("injected by CNNTRAIN_TEST_CKPT_FAULT"), std::string::npos) << what;
    EXPECT_TRUE(same_on_all_ranks(what)) << what;
    barrier();
    EXPECT_FALSE(exists(b + ".tmp")) << "the unfinished file was left behind";
    EXPECT_FALSE(exists(b));
    // The previous checkpoint is intact.
    Model back(7);
    CheckpointMeta m;
    std::string err;
    ASSERT_TRUE(read_checkpoint(a, back.arrays, m, err)) << err;
    EXPECT_EQ(m.step, 1);
    for (size_t i = 0; i < back.data.size(); ++i) EXPECT_EQ(back.data[i], good.data[i]) << good.arrays[i].path;
  }
  // And the next write works.
  set_ckpt_fault("");
  Model other(100);
  write_checkpoint(b, other.arrays, meta(2));
  EXPECT_TRUE(exists(b));
}

TEST_F(CheckpointFaults, AReadFailureOnOneRankFailsTheReadOnEveryRank) {
  Model good(1);
  const std::string a = dir_ + "/" + checkpoint_name(1);
  write_checkpoint(a, good.arrays, meta(1));
  const int last = world_size() - 1;
  for (const std::string& f : {std::string("stat:0"), strprintf("stat:%d", last), std::string("open:0"),
                               strprintf("open:%d", last)}) {
    SCOPED_TRACE(f);
    set_ckpt_fault(f);
    const int rank = std::stoi(f.substr(f.find(':') + 1));
    Model back(7);
    CheckpointMeta m;
    std::string err;
    EXPECT_FALSE(read_checkpoint(a, back.arrays, m, err));
    EXPECT_NE(err.find(strprintf("rank %d on %s", rank, host_name().c_str())), std::string::npos) << err;
    EXPECT_NE(err.find(f[0] == 's' ? "does not exist" : "cannot open checkpoint"), std::string::npos) << err;
    EXPECT_TRUE(same_on_all_ranks(err)) << err;
  }
  set_ckpt_fault("");
  Model back(7);
  CheckpointMeta m;
  std::string err;
  ASSERT_TRUE(read_checkpoint(a, back.arrays, m, err)) << err;
  for (size_t i = 0; i < back.data.size(); ++i) EXPECT_EQ(back.data[i], good.data[i]);
}

}  // namespace
}  // namespace cnn
