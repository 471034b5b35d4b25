// The bucketing every GradSync implementation shares (MPI, host-staged, NCCL): the buckets' layout, when
// each is launched, the counters. An implementation says how one bucket is summed (launch) and how the
// step's sums are completed (complete).
#pragma once
#include <string>
#include <vector>

#include "kernels/collectives.h"

namespace cnn {

class BucketedGradSync : public GradSync {
 public:
  BucketedGradSync(Collectives* owner, float* grads, size_t n, const GradSyncOptions& o);
  BucketedGradSync(const BucketedGradSync&) = delete;
  BucketedGradSync& operator=(const BucketedGradSync&) = delete;

  void on_ready(size_t ready_offset) override;
  double finish() override;
  size_t num_buckets() const override { return starts_.size(); }
  size_t bucket_begin(size_t i) const override { return starts_[i]; }
  size_t bucket_end(size_t i) const override { return ends_[i]; }
  const GradSyncCounters& counters() const override { return counters_; }
  Collectives* collectives() const override { return owner_; }

 protected:
  const GradSyncOptions& options() const { return opt_; }
  float* grads() const { return grads_; }
  size_t size() const { return n_; }

  // Sum-allreduce of bucket i, in place.
  virtual void launch(size_t i, float* data, size_t n, const std::string& what) = 0;
  // Called by on_ready() when nothing was launched: MPI progresses its requests here.
  virtual void progress() {}
  // After the last launch: completes the step's buckets (see finish()); returns host seconds waited.
  virtual double complete() = 0;

 private:
  void launch_bucket(size_t i);

  Collectives* owner_;
  float* grads_;
  size_t n_;
  GradSyncOptions opt_;
  std::vector<size_t> starts_, ends_;  // bucket bounds, descending; GradSyncOptions::skip lies between them
  size_t next_ = 0;             // next bucket to launch
  GradSyncCounters counters_;
};

}  // namespace cnn
