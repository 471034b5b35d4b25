// The per-rank step breakdown of a log interval, gathered from every rank, and straggler detection.
// A rank's busy time is its step time without exposed communication and checkpoints: in synchronous data
// parallelism every rank waits for the slowest one in the gradient allreduce, so total step times are equal
// and only the time a rank spends on its own work tells which rank makes the others wait.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/obs/nvml.h"
#include "src/obs/runlog.h"
#include "src/obs/step_timing.h"

namespace cnn {

struct RankSample {
  PhaseSeconds phase{};  // seconds summed over the interval's steps
  double steps = 0;
  double mem_in_use = 0, mem_peak = 0;  // bytes held by the backend (device memory on GPUs)
  double rss = 0, rss_peak = 0;         // this process's resident set (VmRSS, VmHWM), bytes
  GpuFigures gpu;                       // the rank's GPU over the interval (NaN: no figures)
  double busy() const;
};

// A warning any rank may raise: rank 0's goes to the run log (stderr, log.txt), another rank's to its own stderr
// with its rank and host (the run log is rank 0's).
void rank_warning(RunLog& log, const std::string& msg);

// VmRSS and VmHWM of this process in bytes (0 where /proc is not available).
void read_process_memory(double* rss, double* rss_peak);

// Collective: every rank's sample, in rank order, on every rank.
std::vector<RankSample> gather_rank_samples(const RankSample& mine);
// Collective: every rank's host name, in rank order.
std::vector<std::string> gather_host_names();

struct Straggler {
  int rank = 0;
  int phase = 0;             // the phase furthest above its median
  double busy = 0, busy_median = 0;
  double phase_s = 0, phase_median = 0;  // per step
};

// Ranks whose busy time per step is more than pct percent above the median of all ranks (three or more ranks;
// with two the median is their mean).
std::vector<Straggler> find_stragglers(const std::vector<RankSample>& ranks, double pct);
// "straggler: rank 5 on node12, backward 31% above the median (busy 0.412 s/step, median 0.315 s)"
std::string describe_straggler(const Straggler& s, const std::vector<std::string>& hosts);
// The {"event":"ranks",...} line: per-rank arrays of seconds per step for each phase, busy time, memory, and
// "straggler" (1 for the ranks find_stragglers named), and the GPU figures of the ranks that have them (null for the
// others; an array no rank has is left out).
Json ranks_event(int64_t step, const std::vector<RankSample>& ranks, const std::vector<Straggler>& stragglers);

}  // namespace cnn
