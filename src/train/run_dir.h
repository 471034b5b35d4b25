// One run per run directory. The directory records what identifies its run (run.json: model, a hash of its
// graph's parameter names and shapes, training data, global batch, seed); before anything is written there,
// rank 0 checks that this invocation may use it: a new run (--resume none) never goes into a directory that
// already holds a run, and a resume never continues another model's or graph's checkpoints. A refusal leaves
// every file of the directory untouched (docs/run_directory.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/net.h"
#include "src/train/config.h"

namespace cnn {

struct RunIdentity {
  std::string model, graph, data;  // graph: hex hash of the parameter and buffer names and shapes
  int64_t params = 0, global_batch = 0;
  uint64_t seed = 0;
};

RunIdentity run_identity(const Config& cfg, const Net& net);
// run.json's contents (one JSON object) and back; parse returns false on anything it did not write.
std::string identity_json(const RunIdentity& id);
bool parse_identity_json(const std::string& text, RunIdentity& id);

// Rank 0, before the run writes anything into `dir`. Throws Error(kExitUsage) for a new run into a directory
// that holds a run (checkpoints, metrics.jsonl or run.json) and Error(kExitCheckpoint) for a resume whose
// model, graph or global batch differ from the directory's run, or whose optimizer differs from the newest
// checkpoint's; the messages name the directory and what to do. Returns warnings for the log (the data moved).
std::vector<std::string> check_run_dir(const std::string& dir, const Config& cfg, const RunIdentity& id);
// Writes DIR/run.json unless it exists (a resumed run keeps the first one's). Throws Error(kExitUsage).
void write_run_identity(const std::string& dir, const RunIdentity& id);

// The command that continues a run stopped early (a signal, --train.stop_at_step): its config.ini holds
// every option except the invocation's (run-dir, resume, stop_at_step).
std::string resume_command(const Config& cfg, const std::string& dir);

}  // namespace cnn
