// The device arena of the CUDA backend (emulated build): alignment, exact-size reuse without new
// cudaMalloc calls, dedicated blocks for large requests, and everything returned at destruction.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/cuda/cuda_arena.h"

namespace cnn::emu {
namespace {

TEST(DeviceArena, ReusesFreedBlocksOfTheSameSize) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer build: every block is its own cudaMalloc";
#endif
  const size_t before = simt::device_bytes_in_use();
  {
    DeviceArena arena(1 << 20);
    void* a = arena.alloc(1000);
    void* b = arena.alloc(1000);
    void* c = arena.alloc(1);
    for (void* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % DeviceArena::kAlign, 0u);
    EXPECT_EQ(arena.cuda_mallocs(), 1);
    EXPECT_EQ(arena.bytes_in_use(), 1024u + 1024u + 256u);
    arena.release(a);
    EXPECT_EQ(arena.alloc(1010), a);  // same rounded size
    arena.release(b);
    void* d = arena.alloc(2000);  // different size: from the bump pointer, not b
    EXPECT_NE(d, b);
    EXPECT_EQ(arena.cuda_mallocs(), 1);
    void* big = arena.alloc(600 << 10);  // over half a chunk: its own cudaMalloc, freed on release
    EXPECT_EQ(arena.cuda_mallocs(), 2);
    const size_t reserved = arena.reserved_bytes();
    arena.release(big);
    EXPECT_EQ(arena.reserved_bytes(), reserved - (600u << 10));
    for (int i = 0; i < 600; ++i) arena.alloc(4096);  // fills the first chunk, opens a second
    EXPECT_EQ(arena.cuda_mallocs(), 4);
    EXPECT_GE(arena.peak_bytes(), 600u * 4096);
    arena.release(nullptr);
  }
  EXPECT_EQ(simt::device_bytes_in_use(), before);
}

}  // namespace
}  // namespace cnn::emu
