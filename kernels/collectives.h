// Sums across the ranks that train together, over the memory of one backend: the interface the device-facing
// code is given (model layers that need sums over the global batch, e.g. synchronised batch norm; the
// trainer's gradient averaging, buffers and metrics). No MPI or NCCL type appears here: the implementations
// live in src/comm (factories: src/comm/collectives.h), and code above them receives a Collectives* instead
// of including them.
//   MPI          host memory (the CPU backend, whose ops have finished when they return)
//   host-staged  a device backend's memory through MPI on host copies (--comm.backend mpi, shared GPUs)
//   NCCL         device memory (CUDA, and the SIMT emulator against the emulated NCCL); every collective
//                runs on a communication stream after an event of the compute stream, and the compute stream
//                waits for its result through an event: stream-ordered, no host synchronisation.
// All ranks must issue the same collectives in the same order. Every collective has the watchdog's deadline.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
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
  // [begin, end) ranges of the buffer that are never summed (frozen parameters between trainable ones,
  // src/train/freeze.h): no bucket covers them, so they cost no traffic.
  std::vector<std::pair<size_t, size_t>> skip;
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
  virtual ~GradSync() = default;
  // Backward has made the gradient from `ready_offset` to the end final: launches every bucket lying
  // entirely there that has not been launched (with overlap off: nothing).
  virtual void on_ready(size_t ready_offset) = 0;
  // Launches what is left. Afterwards the optimizer may use the summed gradient: MPI has completed it; NCCL
  // has made the compute stream wait for it. Returns the seconds the host waited here.
  virtual double finish() = 0;

  virtual size_t num_buckets() const = 0;
  // Bucket i (0: the last one of the buffer) covers [bucket_begin(i), bucket_end(i)).
  virtual size_t bucket_begin(size_t i) const = 0;
  virtual size_t bucket_end(size_t i) const = 0;
  virtual const GradSyncCounters& counters() const = 0;
  // The collectives this sync runs on (for layers that need sums over the same ranks, e.g. synchronised BN).
  virtual Collectives* collectives() const = 0;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  // One line for the log, e.g. "NCCL 2.28.9 on the device (communication stream)".
  virtual std::string describe() const = 0;
  // The number of ranks every sum runs over.
  virtual int ranks() const = 0;
  // In-place sum over all ranks of this backend's memory; `what` names it in watchdog reports. The result is
  // visible to the backend work issued after the call.
  virtual void allreduce_sum(float* data, size_t n, const std::string& what) = 0;
  virtual void allreduce_sum(double* data, size_t n, const std::string& what) = 0;
  // In-place sum over the same ranks of host memory (loss and accuracy totals, evaluation counts): blocking,
  // the result is on the host when it returns. Through MPI in every implementation: a few numbers per log
  // interval do not pay for a round trip through the device.
  virtual void allreduce_sum_host(double* data, size_t n, const std::string& what) = 0;
  // A GradSync over `grads` (n floats of this backend's memory); it must not outlive this object.
  virtual std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) = 0;
};

}  // namespace cnn
