// The memory that recomputing residual blocks share (activation recomputation, docs/perf.md). Such a block
// keeps only its input and output between its forward and backward passes; its intermediate activations, ReLU
// masks and activation-gradient temporaries matter only while it runs one of them, and blocks run one at a
// time, so every block lays its share out from offset 0 of one region, sized for the largest block.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "kernels/backend.h"

namespace cnn {

class ScratchRegion {
 public:
  ScratchRegion() = default;
  ~ScratchRegion();
  ScratchRegion(const ScratchRegion&) = delete;
  ScratchRegion& operator=(const ScratchRegion&) = delete;

  // The next block's reservations start again at offset 0.
  void begin_block();
  // Reserves `bytes` for the current block (`per_sample` of them per sample: what the batch size multiplies);
  // `bind` receives the address once allocate() has run.
  void reserve(size_t bytes, size_t per_sample, std::function<void(void*)> bind);
  // Allocates the region for the largest block and hands every reservation its address; once, after every
  // block reserved its share.
  void allocate(Backend& be);
  // Of the largest block.
  size_t bytes() const { return max_bytes_; }
  size_t bytes_per_sample() const { return max_per_sample_; }

 private:
  struct Slot {
    size_t offset;
    std::function<void(void*)> bind;
  };
  std::vector<Slot> slots_;
  size_t top_ = 0, top_per_sample_ = 0, max_bytes_ = 0, max_per_sample_ = 0;
  Backend* be_ = nullptr;
  void* base_ = nullptr;
};

}  // namespace cnn
