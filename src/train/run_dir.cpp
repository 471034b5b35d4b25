#include "src/train/run_dir.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"
#include "src/obs/runlog.h"

namespace cnn {

namespace {

const char* const kIdentityFile = "/run.json";

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The value of "key" in a one-level JSON object written by Json (strings with its escapes, or integers).
bool json_get(const std::string& text, const std::string& key, std::string& out) {
  const std::string k = "\"" + key + "\":";
  size_t i = text.find(k);
  if (i == std::string::npos) return false;
  i += k.size();
  out.clear();
  if (i < text.size() && text[i] != '"') {
    const size_t end = text.find_first_of(",}", i);
    if (end == std::string::npos) return false;
    out = text.substr(i, end - i);
    return !out.empty();
  }
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i >= text.size()) return false;
    switch (text[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'u':
        if (i + 4 >= text.size()) return false;
        out += static_cast<char>(std::strtol(text.substr(i + 1, 4).c_str(), nullptr, 16));
        i += 4;
        break;
      default: out += text[i];
    }
  }
  return i < text.size();
}

bool json_get_int(const std::string& text, const std::string& key, int64_t& out) {
  std::string v;
  if (!json_get(text, key, v)) return false;
  char* end = nullptr;
  out = std::strtoll(v.c_str(), &end, 10);
  return *end == '\0';
}

bool file_size(const std::string& path, int64_t& size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  size = st.st_size;
  return true;
}

std::string describe(const RunIdentity& id) {
  std::string s = "model " + id.model;
  if (!id.graph.empty()) s += strprintf(" (graph %s, %lld parameters)", id.graph.c_str(), (long long)id.params);
  return s + strprintf(", global batch %lld", (long long)id.global_batch);
}

// What identifies the run already in `dir`: its run.json, or for a directory written before run.json existed,
// the newest checkpoint's metadata (model, global batch, seed; no graph hash). False when neither says.
bool recorded_identity(const std::string& dir, const std::vector<std::string>& ckpts, RunIdentity& id) {
  std::ifstream in(dir + kIdentityFile);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    if (!parse_identity_json(ss.str(), id))
      raise(kExitUsage, "run directory '%s': '%s' is not a run identity written by cnntrain; use a new --run-dir",
            dir.c_str(), (dir + kIdentityFile).c_str());
    return true;
  }
  CheckpointMeta m;
  std::string err;
  if (ckpts.empty() || !read_checkpoint_meta(ckpts.front(), m, err)) return false;
  id.model = m.model;
  id.global_batch = m.global_batch;
  id.seed = m.seed;
  return true;
}

}  // namespace

RunIdentity run_identity(const Config& cfg, const Net& net) {
  RunIdentity id;
  id.model = cfg.model;
  uint64_t h = 14695981039346656037ull;
  for (const auto* table : {&net.param_table(), &net.buffer_table()})
    for (const ParamInfo& p : *table) {
      h = fnv1a(h, p.name);
      for (int d : p.shape) h = fnv1a(h, "," + std::to_string(d));
      h = fnv1a(h, ";");
    }
  id.graph = strprintf("%016llx", (unsigned long long)h);
  id.params = static_cast<int64_t>(net.num_params());
  id.data = cfg.data.synthetic.empty() ? cfg.data.train : "synthetic:" + cfg.data.synthetic;
  id.global_batch = cfg.train.batch;
  id.seed = cfg.seed;
  return id;
}

std::string identity_json(const RunIdentity& id) {
  Json j;
  j.add("model", id.model).add("graph", id.graph).add("params", id.params).add("data", id.data)
      .add("global_batch", id.global_batch).add("seed", std::to_string(id.seed));
  return j.str() + "\n";
}

bool parse_identity_json(const std::string& text, RunIdentity& id) {
  std::string seed;
  if (!json_get(text, "model", id.model) || !json_get(text, "graph", id.graph) ||
      !json_get_int(text, "params", id.params) || !json_get(text, "data", id.data) ||
      !json_get_int(text, "global_batch", id.global_batch) || !json_get(text, "seed", seed))
    return false;
  char* end = nullptr;
  id.seed = std::strtoull(seed.c_str(), &end, 10);
  return !seed.empty() && *end == '\0';
}

std::vector<std::string> check_run_dir(const std::string& dir, const Config& cfg, const RunIdentity& id) {
  const std::vector<std::string> ckpts = list_checkpoints(dir + "/checkpoints");
  int64_t metrics_bytes = 0, ignored = 0;
  const bool has_metrics = file_size(dir + "/metrics.jsonl", metrics_bytes) && metrics_bytes > 0;
  const bool has_identity = file_size(dir + kIdentityFile, ignored);
  if (!has_metrics && ckpts.empty() && !has_identity) return {};
  RunIdentity old;
  const bool known = recorded_identity(dir, ckpts, old);
  if (cfg.resume == "none") {
    std::string what = ckpts.empty() ? "" : strprintf("%zu checkpoint%s, newest %s", ckpts.size(),
                                                       ckpts.size() == 1 ? "" : "s", ckpts.front().c_str());
    if (has_metrics) what += (what.empty() ? "" : "; ") + std::string("metrics.jsonl");
    if (what.empty()) what = "run.json";
    raise(kExitUsage, "run directory '%s' already holds a run (%s%s%s): continue it with --resume auto, or give this "
          "run a new --run-dir; nothing in it was changed", dir.c_str(), known ? describe(old).c_str() : "",
          known ? "; " : "", what.c_str());
  }
  if (!known) return {};
  const bool graph_differs = !old.graph.empty() && old.graph != id.graph;
  if (old.model != id.model || graph_differs || old.global_batch != id.global_batch)
    raise(kExitCheckpoint, "--resume %s: run directory '%s' holds a run of %s, but this run builds %s: continue it "
          "with the same --model and --train.batch, or start this run in a new --run-dir; nothing in it was changed",
          cfg.resume.c_str(), dir.c_str(), describe(old).c_str(), describe(id).c_str());
  CheckpointMeta m;
  std::string err;
  if (!ckpts.empty() && read_checkpoint_meta(ckpts.front(), m, err) && !m.optimizer.empty() &&
      m.optimizer != cfg.train.optimizer)
    raise(kExitCheckpoint, "--resume %s: the checkpoints in '%s' hold %s state, but this run uses "
          "--train.optimizer %s: continue with --train.optimizer %s, or start this run in a new --run-dir; nothing "
          "in it was changed", cfg.resume.c_str(), dir.c_str(), m.optimizer.c_str(), cfg.train.optimizer.c_str(),
          m.optimizer.c_str());
  std::vector<std::string> warnings;
  if (!old.data.empty() && old.data != id.data)
    warnings.push_back(strprintf("run directory '%s' was trained on '%s'; this run reads '%s'", dir.c_str(),
                                 old.data.c_str(), id.data.c_str()));
  return warnings;
}

void write_run_identity(const std::string& dir, const RunIdentity& id) {
  const std::string path = dir + kIdentityFile;
  int64_t ignored = 0;
  if (file_size(path, ignored)) return;
  std::ofstream f(path);
  f << identity_json(id);
  if (!f.good()) raise(kExitUsage, "cannot write '%s' (check --run-dir)", path.c_str());
}

std::string resume_command(const Config& cfg, const std::string& dir) {
  std::string cmd = strprintf("%s --config %s/config.ini --run-dir %s --resume auto", cfg.program.c_str(),
                              dir.c_str(), dir.c_str());
  if (world_size() > 1) cmd += " (under the same launcher, on any number of ranks)";
  return cmd;
}

}  // namespace cnn
