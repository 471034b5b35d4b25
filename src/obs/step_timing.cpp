#include "src/obs/step_timing.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "src/base/error.h"

namespace cnn {

namespace {

const char* const kPhaseNames[kNumPhases] = {"data", "h2d", "forward", "backward", "comm", "optimizer",
                                             "checkpoint"};

}  // namespace

const char* phase_name(int phase) { return phase >= 0 && phase < kNumPhases ? kPhaseNames[phase] : "?"; }

StepTiming::StepTiming(Backend& be, int rank) : timer_(be.make_phase_timer()) {
  const char* env = std::getenv("CNNTRAIN_TEST_DELAY");
  if (!env || !*env) return;
  int r = -1, ms = -1;
  char name[32] = {0};
  if (std::sscanf(env, "%d:%31[a-z0-9]:%d", &r, name, &ms) != 3 || ms < 0)
    raise(kExitUsage, "CNNTRAIN_TEST_DELAY='%s': expected RANK:PHASE:MS (a test-only hook)", env);
  int p = -1;
  for (int i = 0; i < kNumPhases; ++i)
    if (std::strcmp(name, kPhaseNames[i]) == 0) p = i;
  if (p <= static_cast<int>(Phase::kData) || p >= static_cast<int>(Phase::kCheckpoint))
    raise(kExitUsage, "CNNTRAIN_TEST_DELAY='%s': phase '%s' is not one of h2d, forward, backward, comm, optimizer",
          env, name);
  if (r == rank) {
    delay_phase_ = p;
    delay_ms_ = ms;
  }
}

void StepTiming::mark(Phase p) {
  timer_->mark(static_cast<int>(p));
  if (static_cast<int>(p) == delay_phase_) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
}

void StepTiming::idle() { timer_->mark(-1); }

void StepTiming::poll() { timer_->collect(acc_.data(), kNumPhases, false); }

PhaseSeconds StepTiming::take() {
  timer_->collect(acc_.data(), kNumPhases, true);
  PhaseSeconds out;
  for (int i = 0; i < kNumPhases; ++i) out[i] = acc_[i] + host_[i];
  acc_ = {};
  host_ = {};
  return out;
}

}  // namespace cnn
