// Where a rank's step time goes: data wait, host-to-device copy, forward, backward, exposed communication,
// optimizer, checkpoint. Phases on the compute stream are timed by the backend's PhaseTimer (host clock on the
// CPU backend, CUDA events on cuda/emu, read back without blocking); data wait and checkpoint time are host
// waits, added as measured.
//
// Test-only hook: CNNTRAIN_TEST_DELAY=RANK:PHASE:MS makes rank RANK sleep MS milliseconds at the start of
// PHASE (h2d, forward, backward, comm or optimizer) in every step, to test straggler detection. Not for production use.
#pragma once
#include <array>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace cnn {

enum class Phase { kData, kH2D, kForward, kBackward, kComm, kOptimizer, kCheckpoint };
constexpr int kNumPhases = 7;
using PhaseSeconds = std::array<double, kNumPhases>;
// "data", "h2d", "forward", "backward", "comm", "optimizer", "checkpoint"
const char* phase_name(int phase);

class StepTiming {
 public:
  // Throws Error(kExitUsage) when CNNTRAIN_TEST_DELAY is set but malformed.
  StepTiming(Backend& be, int rank);
  // Starts phase p on the compute stream (ending the one before).
  void mark(Phase p);
  // Ends the running phase: the time until the next mark belongs to no phase.
  void idle();
  // A host-side wait (data, checkpoint) measured by the caller.
  void add(Phase p, double seconds) { host_[static_cast<int>(p)] += seconds; }
  // Takes what the device has finished so far without blocking (keeps the event pool small).
  void poll();
  // Seconds per phase since the last take(), waiting for the device to pass the last mark.
  PhaseSeconds take();

 private:
  std::unique_ptr<PhaseTimer> timer_;
  PhaseSeconds acc_{}, host_{};
  int delay_phase_ = -1;
  int delay_ms_ = 0;
};

}  // namespace cnn
