// Sums across all ranks over the memory of one backend, and the bucketed gradient averaging built on them:
// one interface, two implementations.
//   MPI   host memory (the CPU backend, whose ops have finished when they return): src/comm/mpi_collectives.cpp
//   NCCL  device memory (CUDA, and the SIMT emulator against the emulated NCCL): src/comm/nccl_collectives.cu;
//         every collective runs on a communication stream after an event of the compute stream, and the
//         compute stream waits for its result through an event: stream-ordered, no host synchronisation.
// All ranks must issue the same collectives in the same order. Every collective has the watchdog's deadline.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cnn {

// The type the gradient travels in (--comm.grad_dtype). kF32: the fp32 gradient is summed as it is. 16 bits:
// each bucket is rounded to bf16/fp16, summed in that type (every addition of the reduction computes in fp32
// and rounds to 16 bits, as NCCL's ncclBfloat16/ncclHalf sums do) and widened back into the fp32 gradient:
// half the bytes on the wire, at the price described in docs/mixed_precision.md. On one rank nothing travels
// and nothing is rounded.
enum class GradWire : uint8_t { kF32, kBF16, kF16 };

struct GradSyncOptions {
  size_t bucket_bytes = size_t{25} << 20;  // --comm.bucket_mb
  bool overlap = true;                     // --comm.overlap false: every bucket starts after backward
  GradWire wire = GradWire::kF32;          // --comm.grad_dtype
};

struct GradSyncCounters {
  int64_t steps = 0;
  int64_t buckets = 0;               // launched in total
  int64_t launched_in_backward = 0;  // of those, launched by on_ready() before finish(), i.e. during backward
};

class Collectives;

// Gradient averaging over the flat gradient buffer in buckets cut from its end (the last layers' gradients
// are final first during backward). Each bucket is launched as soon as backward has passed its start, so its
// transfer overlaps the rest of backward. The loss gradient is already scaled by 1/global_batch, so the sum
// over ranks is the global mean gradient.
class GradSync {
 public:
  GradSync(Collectives* owner, float* grads, size_t n, const GradSyncOptions& o);
  virtual ~GradSync() = default;
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Backward has made the gradient from `ready_offset` to the end final: launches every bucket lying
  // entirely there that has not been launched (with overlap off: nothing).
  void on_ready(size_t ready_offset);
  // Launches what is left. Afterwards the optimizer may use the summed gradient: MPI has completed it; NCCL
  // has made the compute stream wait for it. Returns the seconds the host waited here.
  double finish();

  size_t num_buckets() const { return starts_.size(); }
  // Bucket i (0: the last one of the buffer) covers [bucket_begin(i), bucket_end(i)).
  size_t bucket_begin(size_t i) const { return starts_[i]; }
  size_t bucket_end(size_t i) const { return i == 0 ? n_ : starts_[i - 1]; }
  const GradSyncCounters& counters() const { return counters_; }
  // The collectives this sync runs on (for layers that need sums over the same ranks, e.g. synchronised BN).
  Collectives* collectives() const { return owner_; }
  const GradSyncOptions& options() const { return opt_; }

 protected:
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
  std::vector<size_t> starts_;  // bucket start offsets, descending
  size_t next_ = 0;             // next bucket to launch
  GradSyncCounters counters_;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  // One line for the log, e.g. "NCCL 2.28.9 on the device (communication stream)".
  virtual std::string describe() const = 0;
  // In-place sum over all ranks; `what` names it in watchdog reports. The result is visible to the backend
  // work issued after the call.
  virtual void allreduce_sum(float* data, size_t n, const std::string& what) = 0;
  virtual void allreduce_sum(double* data, size_t n, const std::string& what) = 0;
  // A GradSync over `grads` (n floats of this backend's memory); it must not outlive this object.
  virtual std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) = 0;
};

// Collectives over host memory through MPI (blocking sums; non-blocking bucket allreduces progressed while
// backward runs). Works on one rank too (every sum is then the identity).
std::unique_ptr<Collectives> make_mpi_collectives();

}  // namespace cnn
