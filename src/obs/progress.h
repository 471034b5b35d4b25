// Progress of the run: elapsed time and ETAs for the epoch and the run (in the log lines and the train
// events), and, when rank 0's output goes to a terminal, one status line updated in place.
//
// --log.progress auto|bar|lines. auto shows the status line when stdout is a terminal; when the parent process
// is an MPI launcher (mpirun, orted, prted, srun, ...: Open MPI gives every rank a pseudo-terminal even when
// mpirun's own output goes to a file) the launcher's stdout must be a terminal too (Linux /proc). Redirected
// runs (Slurm .out files) get plain lines only.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "src/obs/runlog.h"

namespace cnn {

// Whether `mode` (auto|bar|lines) shows the live status line in this process.
bool progress_bar_wanted(const std::string& mode);
// 0:07, 12:05, 3:04:05 (h:mm:ss, or m:ss under an hour); "?" for a negative or non-finite time.
std::string format_duration(double seconds);

struct Eta {
  double elapsed = 0;    // since the process started training
  double epoch = 0;      // until the current epoch ends
  double run = 0;        // until the last step
};

class Progress {
 public:
  // start: optimizer steps done when this process began (after a resume); total: the run's last step;
  // spe: steps per epoch.
  Progress(RunLog& log, bool bar, int64_t start, int64_t total, int64_t spe);
  // The estimates after `done` optimizer steps, from this process's mean time per step so far.
  Eta eta(int64_t done) const;
  // After every step: redraws the status line (at most 4 times a second) when the bar is on.
  void on_step(int64_t done, double last_loss);
  // Removes the status line (end of the run).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  RunLog& log_;
  bool bar_;
  int64_t start_, total_, spe_;
  Clock::time_point t0_ = Clock::now(), last_draw_{};
};

}  // namespace cnn
