// Timing events are recorded on the compute stream and read back only once the device has passed them
// (cudaEventQuery), so the step-time breakdown adds no synchronisation to a step; events are recycled.
#include "kernels/cuda/cuda_timing.h"

#include <deque>
#include <vector>

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

class EventPhaseTimer final : public PhaseTimer {
 public:
  explicit EventPhaseTimer(cudaStream_t stream) : stream_(stream) {}
  ~EventPhaseTimer() override {
    for (const Mark& m : marks_) cudaEventDestroy(m.event);
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  void mark(int phase) override {
    cudaEvent_t e;
    if (free_.empty()) {
      CUDA_CHECK(cudaEventCreate(&e));
    } else {
      e = free_.back();
      free_.pop_back();
    }
    CUDA_CHECK(cudaEventRecord(e, stream_));
    marks_.push_back({e, phase});
  }

  void collect(double* seconds, int nphases, bool wait) override {
    // Interval i runs from marks_[i] to marks_[i+1]; the newest mark stays as the start of the next one.
    while (marks_.size() >= 2) {
      const Mark& a = marks_[0];
      const Mark& b = marks_[1];
      if (wait) {
        CUDA_CHECK(cudaEventSynchronize(b.event));
      } else {
        const cudaError_t q = cudaEventQuery(b.event);
        if (q == cudaErrorNotReady) break;
        CUDA_CHECK(q);
      }
      float ms = 0.f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a.event, b.event));
      if (a.phase >= 0 && a.phase < nphases) seconds[a.phase] += ms * 1e-3;
      free_.push_back(a.event);
      marks_.pop_front();
    }
  }

 private:
  struct Mark {
    cudaEvent_t event;
    int phase;
  };
  cudaStream_t stream_;
  std::deque<Mark> marks_;
  std::vector<cudaEvent_t> free_;
};

class PinnedMirror final : public HostMirror {
 public:
  PinnedMirror(const void* d_src, size_t bytes, cudaStream_t stream) : src_(d_src), bytes_(bytes), stream_(stream) {
    CUDA_CHECK(cudaMallocHost(&host_, bytes));
    CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  ~PinnedMirror() override {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
    cudaFreeHost(host_);
  }
  void refresh() override {
    CUDA_CHECK(cudaMemcpyAsync(host_, src_, bytes_, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaEventRecord(done_, stream_));
  }
  const void* poll() override {
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) return nullptr;
    CUDA_CHECK(q);
    return host_;
  }
  const void* wait() override {
    CUDA_CHECK(cudaEventSynchronize(done_));
    return host_;
  }

 private:
  const void* src_;
  size_t bytes_;
  cudaStream_t stream_;
  void* host_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

std::unique_ptr<PhaseTimer> make_event_phase_timer(cudaStream_t stream) {
  return std::make_unique<EventPhaseTimer>(stream);
}

std::unique_ptr<HostMirror> make_pinned_mirror(const void* d_src, size_t bytes, cudaStream_t stream) {
  return std::make_unique<PinnedMirror>(d_src, bytes, stream);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
