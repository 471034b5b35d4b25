// The run's live figures in Prometheus' text exposition format (version 0.0.4), taken from the same metrics
// events that metrics.jsonl and TensorBoard get: the job's figures from `train`, `eval` and `checkpoint` events
// (rank 0's), every rank's from the `ranks` event (labels `rank` and `host`). docs/observability.md lists the
// metric names. Thread-safe: the training thread hands in events, an HTTP thread renders.
#pragma once
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "src/obs/runlog.h"

namespace cnn {

class PromMetrics {
 public:
  // hosts: every rank's host, in rank order; info: the labels of cnntrain_info (model, device, ...).
  PromMetrics(std::vector<std::string> hosts, std::vector<std::pair<std::string, std::string>> info);
  // Takes the figures it exports from an event; events it does not export from are ignored.
  void on_event(const Json& j);
  // The exposition: with `job`, cnntrain_info, cnntrain_world_size and the job's figures seen so far; then the
  // per-rank figures of `ranks` (every rank when empty). Checkpoint age is computed now.
  std::string render(bool job, const std::vector<int>& ranks = {}) const;

 private:
  void render_job(std::string& out) const;
  mutable std::mutex mu_;
  std::vector<std::string> hosts_;
  std::vector<std::pair<std::string, std::string>> info_;
  std::vector<double> job_;                  // by kJobMetrics index; NaN: not seen yet
  std::vector<std::vector<double>> rank_;    // [kRankMetrics index][rank]
  double last_checkpoint_ = NAN;             // unix time of the last checkpoint event
  double last_update_ = NAN;                 // unix time of the last event taken
};

// Prometheus label value escaping: backslash, double quote and newline.
std::string prom_escape(const std::string& s);

}  // namespace cnn
