// Gradient averaging across ranks in buckets over the flat gradient buffer. Buckets are cut from the end of
// the buffer (the last layers' gradients are final first during backward); each is allreduced as soon as the
// backward pass has passed its start, overlapping communication with the rest of the backward pass.
// The loss gradient is already scaled by 1/global_batch, so a sum gives the global mean gradient.
#pragma once
#include <cstddef>
#include <vector>

#include "src/comm/comm.h"

namespace cnn {

class GradSync {
 public:
  GradSync(float* grads, size_t n, size_t bucket_bytes);
  // Starts every bucket lying entirely at or after `ready_offset` that has not started yet.
  void on_ready(size_t ready_offset);
  // Starts what is left and waits for all buckets; returns seconds spent waiting here.
  double finish();
  size_t num_buckets() const { return starts_.size(); }

 private:
  float* grads_;
  size_t n_;
  std::vector<size_t> starts_;  // bucket start offsets, descending; bucket i ends where bucket i-1 starts
  size_t next_ = 0;             // next bucket to start
  AsyncAllreduce async_;
};

}  // namespace cnn
