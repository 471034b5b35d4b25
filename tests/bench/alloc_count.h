// Counts heap allocations (malloc and friends, which operator new and oneDNN use) of the whole process, so
// the benchmark can show that a training step allocates nothing after warm-up. Linked into the bench only.
#pragma once
#include <cstdint>

namespace cnn::bench {

uint64_t allocation_count();

}  // namespace cnn::bench
