// The CUDA backend's own stream use under deferred emulator streams (queued work run at synchronisation
// points in seeded orders): batch uploads through the ring of pinned staging buffers on the copy stream,
// and the device arena handing a block released on one stream to another only after its event.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/cuda_arena.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

// A non-blocking stream for the length of a test.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

class Deferred : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override { simt::set_deferred_streams(GetParam()); }
  void TearDown() override { simt::set_deferred_streams(0); }
};

// The arena tests: two streams a and b. They need blocks to be reused, so they skip under AddressSanitizer
// (every block is its own cudaMalloc there).
class ArenaStreams : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer build: every block is its own cudaMalloc";
#endif
  }
  const Stream sa_, sb_;
  const cudaStream_t a = sa_.s, b = sb_.s;
};

// The same under the deferred stream schedule of each seed.
class DeferredArena : public ArenaStreams, public ::testing::WithParamInterface<uint64_t> {
 protected:
  void SetUp() override {
    ArenaStreams::SetUp();
    simt::set_deferred_streams(GetParam());
  }
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

TEST_P(DeferredArena, ArenaReusesAcrossStreamsOnlyAfterTheEvent) {
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

// A block released without a stream may still be in use on any stream the arena knows: nobody, not even the
// null stream, gets it back before the work queued at the release has finished on all of them (before, the
// null stream counted as a stream of its own: the backend's workspace, used on the compute stream but
// released "on" the null stream, went straight to an upload on the copy stream).
TEST_P(DeferredArena, ArenaNullStreamReleaseWaitsForEveryStream) {
  emu::DeviceArena arena(1 << 20);
  arena.add_stream(a);
  arena.add_stream(b);
  void* p = arena.alloc(4000, a);
  ASSERT_EQ(cudaMemsetAsync(p, 0, 4000, a), cudaSuccess);  // still queued at the release
  arena.release(p);
  void* q = arena.alloc(4000, b);
  void* r = arena.alloc(4000);
  EXPECT_NE(q, p) << "stream b got a block that work queued on stream a may still use";
  EXPECT_NE(r, p) << "a block for any stream was handed out while stream a may still use it";
  EXPECT_NE(arena.alloc(4000, a), p) << "a block released without a stream is no stream's own";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(arena.alloc(4000, b), p) << "after every stream passed the release, the block is free for all";
  arena.release(q, b);
  arena.release(r);
}

// Under deferred streams a reused block is NaN-filled on its new stream. A planted bug, a release on the wrong
// stream (work queued on a, released as if on b, so b reuses it at once): for some seeds the fill runs before
// a's queued copy out of the block, and the copy reads NaN bytes instead of the value written. With the
// release on the right stream no seed shows it.
TEST_F(ArenaStreams, ReusedBlocksAreNaNFilledSoAWrongStreamReleaseShows) {
  // Copies 4000 bytes of 0x11 out of an arena block on stream a, then releases the block on `release_on` and
  // has stream b ask for a block of that size; true when the copy read anything but 0x11.
  auto corrupted = [&](uint64_t seed, cudaStream_t release_on) {
    simt::set_deferred_streams(seed);
    std::vector<unsigned char> got(4000);
    {
      emu::DeviceArena arena(1 << 20);
      void* dst = arena.alloc(4000, a);
      void* p = arena.alloc(4000, a);
      EXPECT_EQ(cudaMemsetAsync(p, 0x11, 4000, a), cudaSuccess);
      EXPECT_EQ(cudaMemcpyAsync(dst, p, 4000, cudaMemcpyDeviceToDevice, a), cudaSuccess);
      arena.release(p, release_on);
      void* q = arena.alloc(4000, b);
      EXPECT_EQ(q == p, release_on == b);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(got.data(), dst, 4000, cudaMemcpyDeviceToHost), cudaSuccess);
      arena.release(q, b);
      arena.release(dst, a);
    }
    simt::set_deferred_streams(0);
    return std::any_of(got.begin(), got.end(), [](unsigned char v) { return v != 0x11; });
  };
  int caught = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    caught += corrupted(seed, b);
    EXPECT_FALSE(corrupted(seed, a)) << "seed " << seed << ": the correct release was corrupted";
  }
  EXPECT_GT(caught, 0) << "no seed exposed the release on the wrong stream";
}

INSTANTIATE_TEST_SUITE_P(Seeds, Deferred, ::testing::Values(3, 9, 27));
INSTANTIATE_TEST_SUITE_P(Seeds, DeferredArena, ::testing::Values(3, 9, 27));

}  // namespace
}  // namespace cnn::test
