#include "src/obs/prometheus_metrics.h"

#include <cmath>

#include "src/base/error.h"
#include "src/obs/step_timing.h"

namespace cnn {

namespace {

// A job figure: field `field` of `event`, or (share) that field's share of the interval's wall time.
struct JobMetric {
  const char* event;
  const char* field;
  const char* name;
  const char* help;
  bool share = false;
};

const JobMetric kJobMetrics[] = {
    {"train", "step", "cnntrain_step", "Optimizer steps done."},
    {"train", "epoch", "cnntrain_epoch", "Epoch in progress, from 1."},
    {"train", "samples_per_s", "cnntrain_samples_per_second", "Global training throughput over the last log interval."},
    {"train", "loss", "cnntrain_loss", "Mean training loss over the last log interval."},
    {"train", "train_acc", "cnntrain_train_accuracy_ratio", "Training accuracy over the last log interval."},
    {"train", "lr", "cnntrain_learning_rate", "Learning rate at the end of the last log interval."},
    {"train", "loss_scale", "cnntrain_loss_scale", "fp16 dynamic loss scale (1 without loss scaling)."},
    {"train", "grad_norm", "cnntrain_gradient_norm", "L2 norm of the averaged gradient of the interval's last step."},
    {"train", "data_s", "cnntrain_data_wait_ratio", "Share of rank 0's time spent waiting for the data loader.", true},
    {"train", "comm_s", "cnntrain_exposed_comm_ratio",
     "Share of rank 0's time spent waiting for gradient allreduces (communication not hidden by backward).", true},
    {"train", "elapsed_s", "cnntrain_elapsed_seconds", "Time since this process started training."},
    {"train", "eta_s", "cnntrain_eta_seconds", "Estimated time to the end of the run."},
    {"eval", "test_loss", "cnntrain_test_loss", "Test loss of the last evaluation."},
    {"eval", "test_acc", "cnntrain_test_accuracy_ratio", "Test accuracy of the last evaluation."},
    {"checkpoint", "step", "cnntrain_checkpoint_step", "Step of the last checkpoint this process committed."},
    {"checkpoint", "seconds", "cnntrain_checkpoint_write_seconds", "Time the last checkpoint took to write."},
    {"checkpoint", "bytes", "cnntrain_checkpoint_size_bytes", "Size of the last checkpoint file."},
};
constexpr size_t kNumJobMetrics = sizeof kJobMetrics / sizeof kJobMetrics[0];

// A per-rank figure: array field `field` of the ranks event times `scale`; `phase` labels the phase breakdown.
// An empty field is the rank's step time, the sum of its phases.
struct RankMetric {
  std::string field, name, help, phase;
  double scale = 1;
};

const std::vector<RankMetric>& rank_metrics() {
  static const std::vector<RankMetric> m = [] {
    std::vector<RankMetric> v;
    v.push_back({"", "cnntrain_rank_step_seconds", "Time per step of the rank over the last log interval.", ""});
    for (int p = 0; p < kNumPhases; ++p)
      v.push_back({std::string(phase_name(p)) + "_s", "cnntrain_rank_phase_seconds",
                   "Time per step of the rank in each phase (data wait, copy, forward, backward, exposed "
                   "communication, optimizer, checkpoint), over the last log interval.", phase_name(p)});
    v.push_back({"busy_s", "cnntrain_rank_busy_seconds",
                 "Time per step of the rank without exposed communication and checkpoints.", ""});
    v.push_back({"straggler", "cnntrain_rank_straggler", "1 when the rank was named a straggler at the last log "
                 "interval.", ""});
    v.push_back({"mem_in_use", "cnntrain_rank_memory_in_use_bytes",
                 "Bytes held by the rank's backend allocations (GPU: the device arena's blocks in use).", ""});
    v.push_back({"mem_peak", "cnntrain_rank_memory_peak_bytes", "Peak of cnntrain_rank_memory_in_use_bytes.", ""});
    v.push_back({"rss", "cnntrain_rank_resident_memory_bytes", "Resident set of the rank's process (VmRSS).", ""});
    v.push_back({"gpu_util_pct", "cnntrain_gpu_utilization_ratio",
                 "Share of time a kernel ran on the rank's GPU (NVML), mean over the last log interval.", "", 0.01});
    v.push_back({"gpu_mem_used", "cnntrain_gpu_memory_used_bytes",
                 "Memory used on the rank's GPU by all processes (NVML), mean over the last log interval.", ""});
    v.push_back({"gpu_mem_total", "cnntrain_gpu_memory_total_bytes", "Memory of the rank's GPU (NVML).", ""});
    v.push_back({"gpu_temp_c", "cnntrain_gpu_temperature_celsius",
                 "Temperature of the rank's GPU (NVML), mean over the last log interval.", ""});
    v.push_back({"gpu_power_w", "cnntrain_gpu_power_watts",
                 "Power draw of the rank's GPU board (NVML), mean over the last log interval.", ""});
    return v;
  }();
  return m;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void family(std::string& out, const char* name, const char* help) {
  out += strprintf("# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

}  // namespace

std::string prom_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

PromMetrics::PromMetrics(std::vector<std::string> hosts, std::vector<std::pair<std::string, std::string>> info)
    : hosts_(std::move(hosts)), info_(std::move(info)), job_(kNumJobMetrics, NAN),
      rank_(rank_metrics().size(), std::vector<double>(hosts_.size(), NAN)) {}

void PromMetrics::on_event(const Json& j) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& ev = j.event();
  std::map<std::string, double> num(j.numbers().begin(), j.numbers().end());
  bool taken = false;
  for (size_t i = 0; i < kNumJobMetrics; ++i) {
    const JobMetric& m = kJobMetrics[i];
    auto it = num.find(m.field);
    if (ev != m.event || it == num.end()) continue;
    double v = it->second;
    if (m.share) {
      const double wall = num["data_s"] + num["compute_s"] + num["comm_s"];
      v = wall > 0 ? v / wall : NAN;
    }
    job_[i] = v;
    taken = true;
  }
  if (ev == "checkpoint") last_checkpoint_ = unix_now();
  if (ev == "ranks") {
    std::map<std::string, std::vector<double>> arr(j.arrays().begin(), j.arrays().end());
    const std::vector<RankMetric>& rm = rank_metrics();
    for (size_t i = 0; i < rm.size(); ++i) {
      std::vector<double>& out = rank_[i];
      std::fill(out.begin(), out.end(), NAN);
      for (size_t r = 0; r < out.size(); ++r) {
        if (rm[i].field.empty()) {  // step time: the sum of the phases
          double s = 0;
          for (int p = 0; p < kNumPhases; ++p) {
            auto it = arr.find(std::string(phase_name(p)) + "_s");
            s += it != arr.end() && r < it->second.size() ? it->second[r] : NAN;
          }
          out[r] = s;
          continue;
        }
        auto it = arr.find(rm[i].field);
        if (it != arr.end() && r < it->second.size()) out[r] = it->second[r] * rm[i].scale;
      }
    }
    taken = true;
  }
  if (taken) last_update_ = unix_now();
}

void PromMetrics::render_job(std::string& out) const {
  family(out, "cnntrain_info", "The run: model, device, precision, version and run directory (value 1).");
  out += "cnntrain_info{";
  for (size_t i = 0; i < info_.size(); ++i)
    out += strprintf("%s%s=\"%s\"", i ? "," : "", info_[i].first.c_str(), prom_escape(info_[i].second).c_str());
  out += "} 1\n";
  family(out, "cnntrain_world_size", "Ranks of the job.");
  out += strprintf("cnntrain_world_size %zu\n", hosts_.size());
  auto value = [&](const char* name, const char* help, double v) {
    if (!std::isfinite(v)) return;
    family(out, name, help);
    out += std::string(name) + " " + json_number(v) + "\n";
  };
  for (size_t i = 0; i < kNumJobMetrics; ++i) value(kJobMetrics[i].name, kJobMetrics[i].help, job_[i]);
  value("cnntrain_checkpoint_age_seconds", "Time since this process last committed a checkpoint.",
        unix_now() - last_checkpoint_);
  value("cnntrain_last_update_timestamp_seconds", "Unix time of the last log interval these figures are from.",
        last_update_);
}

std::string PromMetrics::render(bool job, const std::vector<int>& ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  if (job) render_job(out);
  std::vector<int> which = ranks;
  if (which.empty())
    for (size_t r = 0; r < hosts_.size(); ++r) which.push_back(static_cast<int>(r));
  const std::vector<RankMetric>& rm = rank_metrics();
  std::string last_family;
  for (size_t i = 0; i < rm.size(); ++i) {
    for (int r : which) {
      const double v = r >= 0 && r < static_cast<int>(hosts_.size()) ? rank_[i][r] : NAN;
      if (!std::isfinite(v)) continue;
      if (last_family != rm[i].name) {
        family(out, rm[i].name.c_str(), rm[i].help.c_str());
        last_family = rm[i].name;
      }
      out += strprintf("%s{rank=\"%d\",host=\"%s\"%s} %s\n", rm[i].name.c_str(), r, prom_escape(hosts_[r]).c_str(),
                       rm[i].phase.empty() ? "" : strprintf(",phase=\"%s\"", rm[i].phase.c_str()).c_str(),
                       json_number(v).c_str());
    }
  }
  return out;
}

}  // namespace cnn
