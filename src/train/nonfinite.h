// Non-finite (NaN/inf) detection for training steps: the mechanism behind --train.on_nonfinite stop|skip,
// shaped for reuse by fp16 loss scaling (skip a step when any rank sees inf/NaN, without a host sync).
//
// Per step, everything on the compute stream (no host synchronisation, no extra collective):
//   begin_step()      zeroes the step's device record;
//   check_ready(off)  during backward, before a gradient range is allreduced: this rank's own gradient from
//                     `off` up to the range checked before (backward runs from the last layer to the first).
//                     This names the rank and the first layer in backward order (the bad value with the highest
//                     offset). A non-finite loss makes the loss gradient, and so every layer's, non-finite;
//   check_agreed()    after the allreduce: the averaged gradient. Every rank holds the same averaged gradient,
//                     so all reach the same verdict without communicating, and the verdict gates the optimizer
//                     update (Backend::set_update_gate): a bad step changes no weight on any rank;
//   end_step(step)    queues the record's copy to the host (Backend::make_host_mirror).
// The host reads the record of step s at the end of step s + 1 (poll), by when the copy has landed, so no
// step waits for the device and every rank sees every verdict at the same point of its loop (the weights of
// a bad step are unchanged whenever the host learns of it). drain() reads all outstanding records (before logging, evaluation, checkpoints, exit).
// Cost per step: one read of the gradient before and one after the allreduce (a count kernel per layer with
// parameters, one over the whole buffer) and a 32-byte device-to-host copy; docs/observability.md.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/model/net.h"

namespace cnn {

struct NonFiniteRecord {
  int64_t step = 0;               // the step's index (0-based optimizer step)
  int64_t agreed_count = 0;       // non-finite values in the averaged gradient: the same on every rank
  int64_t agreed_last = 0;        // 1 + offset of the last of them (0: none)
  int64_t local_count = 0;        // in this rank's own gradient before the allreduce
  int64_t local_last = 0;         // 1 + offset of the last of those: the first layer in backward order
  bool local_loss_finite = true;  // this rank's loss (where the host has it)
  bool bad() const { return agreed_count > 0; }
};

class NonFiniteGuard {
 public:
  // grads: the flat gradient buffer (n floats) the steps check. With local_checks false (one rank) the
  // averaged gradient is the rank's own and check_ready is not needed.
  NonFiniteGuard(Backend& be, float* grads, size_t n, bool local_checks);
  ~NonFiniteGuard();
  NonFiniteGuard(const NonFiniteGuard&) = delete;
  NonFiniteGuard& operator=(const NonFiniteGuard&) = delete;

  // The device flag (non-zero: this step's averaged gradient is not finite) that gates optimizer updates.
  const int64_t* d_flag() const { return d_rec_; }
  void begin_step(int64_t step);
  void check_ready(size_t offset);
  void check_agreed();
  void end_step(int64_t step, bool local_loss_finite);
  // Records of all but the newest step, oldest first; drain(): all.
  std::vector<NonFiniteRecord> poll();
  std::vector<NonFiniteRecord> drain();

  // Test-only hook: CNNTRAIN_TEST_NAN=RANK:PARAM:STEP writes a NaN into the gradient of parameter PARAM (a
  // name of Net::param_table(), e.g. fc1.weight) on rank RANK at step STEP (0-based), right after the
  // backward pass produced it. Throws Error(kExitUsage) when the variable is malformed or names no parameter.
  void arm_test_injection(const Net& net, int rank);

 private:
  struct Slot {
    std::unique_ptr<HostMirror> mirror;
    int64_t step = -1;
    bool loss_finite = true;
  };
  NonFiniteRecord read(Slot& s, const void* host) const;
  void inject(size_t begin, size_t end);
  std::vector<NonFiniteRecord> take(size_t keep);

  Backend& be_;
  float* grads_;
  size_t n_;
  int64_t step_ = 0;
  int64_t inject_step_ = -1;  // the test hook's step and offset
  size_t inject_offset_ = 0;
  bool local_checks_;
  int64_t* d_rec_ = nullptr;   // {agreed count, agreed last, local count, local last}
  int64_t* d_zero_ = nullptr;  // the same, zero: begin_step copies it over d_rec_
  size_t checked_from_ = 0;
  std::vector<Slot> slots_;
  std::deque<size_t> in_flight_;  // slot indices, oldest first
  std::vector<size_t> free_;
};

// Collective (every rank, with the same bad record): the message naming the step, the ranks whose own
// gradient or loss was non-finite (with their hosts) and the first parameter in backward order that holds a
// non-finite gradient value, e.g. "non-finite gradient at step 41: rank 1 on node3 (17 values, first in
// backward order in fc2.weight of layer fc2)".
std::string describe_nonfinite(const NonFiniteRecord& r, const Net& net, const std::vector<std::string>& hosts);

}  // namespace cnn
