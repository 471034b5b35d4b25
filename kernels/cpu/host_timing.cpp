#include "kernels/cpu/host_timing.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace cnn {

namespace {

using Clock = std::chrono::steady_clock;

class HostPhaseTimer final : public PhaseTimer {
 public:
  void mark(int phase) override {
    const Clock::time_point now = Clock::now();
    if (open_ && phase_ >= 0) pending_.push_back({phase_, std::chrono::duration<double>(now - start_).count()});
    open_ = true;
    phase_ = phase;
    start_ = now;
  }
  void collect(double* seconds, int nphases, bool) override {
    for (const auto& [p, s] : pending_)
      if (p < nphases) seconds[p] += s;
    pending_.clear();
  }

 private:
  bool open_ = false;
  int phase_ = -1;
  Clock::time_point start_;
  std::vector<std::pair<int, double>> pending_;
};

class HostMemoryMirror final : public HostMirror {
 public:
  HostMemoryMirror(const void* src, size_t bytes) : src_(src), copy_(bytes) {}
  void refresh() override { std::memcpy(copy_.data(), src_, copy_.size()); }
  const void* poll() override { return copy_.data(); }
  const void* wait() override { return copy_.data(); }

 private:
  const void* src_;
  std::vector<unsigned char> copy_;
};

}  // namespace

std::unique_ptr<PhaseTimer> make_host_phase_timer() { return std::make_unique<HostPhaseTimer>(); }

std::unique_ptr<HostMirror> make_host_mirror(const void* src, size_t bytes) {
  return std::make_unique<HostMemoryMirror>(src, bytes);
}

}  // namespace cnn
