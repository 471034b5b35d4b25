// A Backend that forwards every call to another backend and times it per op, so the bench can show where a
// training step's time goes op by op (comparable to PyTorch's autograd profiler table), including ops inside
// composite layers (residual blocks) that the per-layer breakdown cannot split. Each op synchronizes the
// wrapped backend before its clock stops. The clock is wall time, or the calling thread's CPU time
// (cpu_clock; with one thread a load-independent measure of the work on a machine shared with other jobs).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace cnn::bench {

class OpProfile {
 public:
  struct Entry {
    double seconds = 0;
    long calls = 0;
  };
  explicit OpProfile(bool cpu_clock = false) : cpu_clock_(cpu_clock) {}
  // Wraps `inner` (not owned); every op's time lands in this profile under the op's name.
  std::unique_ptr<Backend> wrap(Backend& inner);
  bool cpu_clock() const { return cpu_clock_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void clear() { entries_.clear(); }
  void add(const char* op, double seconds) {
    Entry& e = entries_[op];
    e.seconds += seconds;
    ++e.calls;
  }

 private:
  bool cpu_clock_;
  std::map<std::string, Entry> entries_;
};

}  // namespace cnn::bench
