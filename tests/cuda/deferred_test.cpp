// The CUDA backend's own stream use under deferred emulator streams (queued work run at synchronisation
// points in seeded orders): batch uploads through the ring of pinned staging buffers on the copy stream,
// and the device arena handing a block released on one stream to another only after its event.
#include <gtest/gtest.h>

#include "kernels/cuda_arena.h"
#include "kernels/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

class Deferred : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override { simt::set_deferred_streams(GetParam()); }
  void TearDown() override { simt::set_deferred_streams(0); }
};

// Many uploads in a row (more than there are staging buffers, some larger than one buffer) into buffers that
// kernels then read while later uploads are staged: each must land intact.
TEST_P(Deferred, UploadsThroughTheStagingRingLandIntact) {
  auto be = make_emu_backend();
  const std::vector<size_t> sizes = {1000, 17, (5u << 20) / sizeof(float) + 7, 3, 4096, 250000, 9, 1, 77777, 12};
  std::vector<std::vector<float>> host;
  std::vector<float*> staged, copied;
  for (size_t k = 0; k < sizes.size(); ++k) {
    host.push_back(random_vec(sizes[k], 900 + k));
    staged.push_back(static_cast<float*>(be->alloc(sizeof(float) * sizes[k])));
    copied.push_back(static_cast<float*>(be->alloc(sizeof(float) * sizes[k])));
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float> scratch = host[k];  // the caller's buffer is reused right after upload() returns
    be->upload(staged[k], scratch.data(), sizeof(float) * sizes[k]);
    std::fill(scratch.begin(), scratch.end(), -7.f);
    be->copy(copied[k], staged[k], sizeof(float) * sizes[k]);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float> got(sizes[k]);
    be->download(got.data(), copied[k], sizeof(float) * sizes[k]);
    ASSERT_TRUE(all_close(got, host[k], 0, 0, "upload " + std::to_string(k)));
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    be->release(staged[k]);
    be->release(copied[k]);
  }
}

TEST_P(Deferred, ArenaReusesAcrossStreamsOnlyAfterTheEvent) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer build: every block is its own cudaMalloc";
#endif
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  {
    emu::DeviceArena arena(1 << 20);
    void* p = arena.alloc(4000, a);
    ASSERT_EQ(cudaMemsetAsync(p, 0, 4000, a), cudaSuccess);  // work on `a` still queued at the release
    arena.release(p, a);
    void* q = arena.alloc(4000, b);
    EXPECT_NE(q, p) << "stream b got a block stream a may still be writing";
    void* r = arena.alloc(4000, a);
    EXPECT_EQ(r, p) << "stream a's own released block should be reused at once (stream order protects it)";
    arena.release(r, a);
    ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    EXPECT_EQ(arena.alloc(4000, b), p) << "after the event completed, another stream may reuse the block";
    arena.release(q, b);
  }
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

INSTANTIATE_TEST_SUITE_P(Seeds, Deferred, ::testing::Values(3, 9, 27));

}  // namespace
}  // namespace cnn::test
