#include "src/obs/rank_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "src/base/error.h"
#include "src/comm/comm.h"

namespace cnn {

namespace {

constexpr size_t kHostField = 64;
constexpr size_t kSampleDoubles = kNumPhases + 5 + kNumGpuFigures;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double per_step(const RankSample& r, double s) { return r.steps > 0 ? s / r.steps : 0; }

}  // namespace

double RankSample::busy() const {
  double b = 0;
  for (int p = 0; p < kNumPhases; ++p)
    if (p != static_cast<int>(Phase::kComm) && p != static_cast<int>(Phase::kCheckpoint)) b += phase[p];
  return b;
}

void rank_warning(RunLog& log, const std::string& msg) {
  if (world_rank() == 0)
    log.warn("%s", msg.c_str());
  else
    std::fprintf(stderr, "warning: %s %s\n", rank_tag().c_str(), msg.c_str());
}

void read_process_memory(double* rss, double* rss_peak) {
  *rss = *rss_peak = 0;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long long kb = 0;
    if (std::sscanf(line, "VmRSS: %lld kB", &kb) == 1) *rss = kb * 1024.0;
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1) *rss_peak = kb * 1024.0;
  }
  std::fclose(f);
}

std::vector<RankSample> gather_rank_samples(const RankSample& mine) {
  const int n = world_size(), me = world_rank();
  std::vector<double> buf(kSampleDoubles * n);
  double* own = buf.data() + kSampleDoubles * me;
  std::copy(mine.phase.begin(), mine.phase.end(), own);
  own[kNumPhases] = mine.steps;
  own[kNumPhases + 1] = mine.mem_in_use;
  own[kNumPhases + 2] = mine.mem_peak;
  own[kNumPhases + 3] = mine.rss;
  own[kNumPhases + 4] = mine.rss_peak;
  for (int i = 0; i < kNumGpuFigures; ++i) own[kNumPhases + 5 + i] = gpu_figure(mine.gpu, i);
  std::vector<size_t> offsets(n + 1);
  for (int r = 0; r <= n; ++r) offsets[r] = sizeof(double) * kSampleDoubles * r;
  allgather_bytes(buf.data(), offsets);
  std::vector<RankSample> out(n);
  for (int r = 0; r < n; ++r) {
    const double* s = buf.data() + kSampleDoubles * r;
    std::copy(s, s + kNumPhases, out[r].phase.begin());
    out[r].steps = s[kNumPhases];
    out[r].mem_in_use = s[kNumPhases + 1];
    out[r].mem_peak = s[kNumPhases + 2];
    out[r].rss = s[kNumPhases + 3];
    out[r].rss_peak = s[kNumPhases + 4];
    for (int i = 0; i < kNumGpuFigures; ++i) gpu_figure(out[r].gpu, i) = s[kNumPhases + 5 + i];
  }
  return out;
}

std::vector<std::string> gather_host_names() {
  const int n = world_size(), me = world_rank();
  std::vector<char> buf(kHostField * n, '\0');
  std::strncpy(buf.data() + kHostField * me, host_name().c_str(), kHostField - 1);
  std::vector<size_t> offsets(n + 1);
  for (int r = 0; r <= n; ++r) offsets[r] = kHostField * r;
  allgather_bytes(buf.data(), offsets);
  std::vector<std::string> hosts(n);
  for (int r = 0; r < n; ++r) hosts[r] = std::string(buf.data() + kHostField * r);
  return hosts;
}

std::vector<Straggler> find_stragglers(const std::vector<RankSample>& ranks, double pct) {
  std::vector<Straggler> out;
  // With two ranks the median is their mean and the slower one is always above it: noise, not a straggler.
  if (ranks.size() < 3 || pct <= 0) return out;
  std::vector<double> busy;
  for (const auto& r : ranks) busy.push_back(per_step(r, r.busy()));
  const double med = median(busy);
  PhaseSeconds phase_med{};
  for (int p = 0; p < kNumPhases; ++p) {
    std::vector<double> v;
    for (const auto& r : ranks) v.push_back(per_step(r, r.phase[p]));
    phase_med[p] = median(v);
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!(busy[i] > med * (1 + pct / 100))) continue;
    Straggler s;
    s.rank = static_cast<int>(i);
    s.busy = busy[i];
    s.busy_median = med;
    double worst = -1;
    for (int p = 0; p < kNumPhases; ++p) {
      if (p == static_cast<int>(Phase::kComm) || p == static_cast<int>(Phase::kCheckpoint)) continue;
      const double excess = per_step(ranks[i], ranks[i].phase[p]) - phase_med[p];
      if (excess > worst) {
        worst = excess;
        s.phase = p;
      }
    }
    s.phase_s = per_step(ranks[i], ranks[i].phase[s.phase]);
    s.phase_median = phase_med[s.phase];
    out.push_back(s);
  }
  return out;
}

std::string describe_straggler(const Straggler& s, const std::vector<std::string>& hosts) {
  const std::string host = s.rank < static_cast<int>(hosts.size()) ? hosts[s.rank] : "?";
  const std::string how = s.phase_median > 0
      ? strprintf("%.0f%% above the median", 100 * (s.phase_s / s.phase_median - 1))
      : strprintf("%.1f ms per step where the median is 0", 1e3 * s.phase_s);
  return strprintf("straggler: rank %d on %s, %s %s (busy %.4f s/step, median %.4f s)", s.rank, host.c_str(),
                   phase_name(s.phase), how.c_str(), s.busy, s.busy_median);
}

Json ranks_event(int64_t step, const std::vector<RankSample>& ranks, const std::vector<Straggler>& stragglers) {
  Json j;
  j.add("event", "ranks").add("step", step);
  std::vector<int64_t> steps;
  for (const auto& r : ranks) steps.push_back(static_cast<int64_t>(r.steps));
  j.add("steps", steps);
  for (int p = 0; p < kNumPhases; ++p) {
    std::vector<double> v;
    for (const auto& r : ranks) v.push_back(per_step(r, r.phase[p]));
    j.add((std::string(phase_name(p)) + "_s").c_str(), v);
  }
  std::vector<double> busy, in_use, peak, rss, rss_peak;
  for (const auto& r : ranks) {
    busy.push_back(per_step(r, r.busy()));
    in_use.push_back(r.mem_in_use);
    peak.push_back(r.mem_peak);
    rss.push_back(r.rss);
    rss_peak.push_back(r.rss_peak);
  }
  j.add("busy_s", busy).add("mem_in_use", in_use).add("mem_peak", peak).add("rss", rss).add("rss_peak", rss_peak);
  for (int i = 0; i < kNumGpuFigures; ++i) {
    std::vector<double> v;
    bool any = false;
    for (const auto& r : ranks) {
      v.push_back(gpu_figure(r.gpu, i));
      any = any || std::isfinite(v.back());
    }
    if (any) j.add(gpu_figure_name(i), v);
  }
  std::vector<int64_t> slow(ranks.size(), 0);
  for (const auto& s : stragglers) slow[s.rank] = 1;
  j.add("straggler", slow);
  return j;
}

}  // namespace cnn
