// The checkpoint's mixed-precision fields (precision, the fp16 loss scaler's state, the optimizer's update
// count) round-trip through a collectively written checkpoint, and a checkpoint without them (as written
// before mixed precision existed) still loads, with the defaults.
#include <hdf5.h>

#include <memory>

#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(CheckpointPrecision, ScalerStateRoundTripsAndOldCheckpointsLoad) {
  std::unique_ptr<test::TempDir> dir;
  std::string path;
  if (world_rank() == 0) {
    dir = std::make_unique<test::TempDir>();
    path = dir->file("ckpt-0000000040.h5");
  }
  broadcast(path, 0);
  std::vector<float> w = test::random_vec(60, 1), back(60);
  CheckpointMeta m;
  m.step = 40;
  m.global_batch = 8;
  m.world_size = world_size();
  m.model = "fmnist_cnn";
  m.loss_scale = 32768.0;
  m.precision = "fp16";
  m.loss_scale_growth = 17;
  m.skipped_steps = 3;
  m.optimizer_steps = 37;
  write_checkpoint(path, {{"params/w", {6, 10}, w.data()}}, m);
  CheckpointMeta r;
  std::string err;
  ASSERT_TRUE(read_checkpoint(path, {{"params/w", {6, 10}, back.data()}}, r, err)) << err;
  EXPECT_EQ(back, w);
  EXPECT_EQ(r.precision, "fp16");
  EXPECT_EQ(r.loss_scale, 32768.0);
  EXPECT_EQ(r.loss_scale_growth, 17);
  EXPECT_EQ(r.skipped_steps, 3);
  EXPECT_EQ(r.optimizer_steps, 37);

  // Remove the new attributes, as in a checkpoint of an earlier version.
  barrier();
  if (world_rank() == 0) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    for (const char* a : {"precision", "loss_scale_growth", "skipped_steps", "optimizer_steps"})
      EXPECT_GE(H5Adelete(f, a), 0) << a;
    H5Fclose(f);
  }
  barrier();
  CheckpointMeta old;
  ASSERT_TRUE(read_checkpoint(path, {{"params/w", {6, 10}, back.data()}}, old, err)) << err;
  EXPECT_EQ(back, w);
  EXPECT_EQ(old.step, 40);
  EXPECT_EQ(old.precision, "");
  EXPECT_EQ(old.loss_scale_growth, 0);
  EXPECT_EQ(old.skipped_steps, 0);
  EXPECT_EQ(old.optimizer_steps, -1);
  barrier();  // rank 0 removes the directory
}

}  // namespace
}  // namespace cnn
