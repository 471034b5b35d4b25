#include "src/train/checkpoint_model.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "io/dataset.h"
#include "src/checkpoint/model_info.h"
#include "src/base/error.h"
#include "src/model/onnx/onnx_export.h"
#include "src/model/onnx/onnx_graph_store.h"
#include "src/model/onnx/onnx_import.h"
#include "src/model/zoo.h"
#include "src/train/config.h"

namespace cnn {

namespace {

// `key` of [section] in the resolved INI a checkpoint stores (config_to_ini's "key = value" lines); "" if absent.
std::string ini_value(const std::string& ini, const std::string& section, const std::string& key) {
  std::istringstream in(ini);
  std::string line, cur;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '[') {
      cur = line.substr(1, line.find(']') - 1);
    } else if (cur == section && line.compare(0, key.size() + 3, key + " = ") == 0) {
      return line.substr(key.size() + 3);
    }
  }
  return "";
}

// The training set the checkpoint's config names, if it can still be opened (older checkpoints: their input
// shape and class count; every checkpoint: mean, std and class names for the metadata).
std::unique_ptr<Dataset> training_set(const CheckpointMeta& meta) {
  const std::string path = ini_value(meta.config, "data", "train");
  if (path.empty() || !ini_value(meta.config, "data", "synthetic").empty()) return nullptr;
  const std::string format = ini_value(meta.config, "data", "format");
  try {
    return open_dataset(path, format.empty() ? "auto" : format);
  } catch (const Error&) {
    return nullptr;
  }
}

CheckpointGraph with_input(CheckpointGraph g, int h, int w, int c, int classes) {
  g.input_h = h, g.input_w = w, g.input_c = c, g.classes = classes;
  return g;
}

// The input shape and class count the network was built for: as the checkpoint records them, else (an older
// checkpoint) as the training set its config names tells them, at --data.image_size, else the caller's.
CheckpointGraph input_of(const std::string& checkpoint, const CheckpointMeta& meta, const CheckpointLoad& how) {
  if (meta.graph.has_input()) return meta.graph;
  const ModelInfo& i = meta.info;
  if (i.has_input_size() && i.num_classes > 0)
    return with_input(meta.graph, i.height, i.width, i.channels, i.num_classes);
  if (auto ds = training_set(meta)) {
    const DatasetInfo& d = ds->info();
    CheckpointGraph g = with_input(meta.graph, d.height, d.width, d.channels, d.num_classes);
    const std::string size = ini_value(meta.config, "data", "image_size");
    if (!size.empty()) std::sscanf(size.c_str(), "%dx%d", &g.input_h, &g.input_w);
    if (g.has_input()) return g;
  }
  const ModelInfo& f = how.fallback;
  if (f.has_input_size() && f.num_classes > 0)
    return with_input(meta.graph, f.height, f.width, f.channels, f.num_classes);
  raise(how.fallback_option.empty() ? kExitCheckpoint : kExitUsage,
        "checkpoint '%s' was written before checkpoints stored the network's input shape, and the training set "
        "its config names ('%s') cannot be opened to tell it: make that file available%s%s", checkpoint.c_str(),
        ini_value(meta.config, "data", "train").c_str(), how.fallback_option.empty() ? "" : ", or pass ",
        how.fallback_option.c_str());
}

// The batch-norm options the checkpoint's run trained with ([bn] of its config): eps changes what inference
// computes. An imported graph's BatchNormalization nodes carry their own epsilon.
ModelOptions model_options(const CheckpointMeta& meta) {
  ModelOptions mo;
  const std::string eps = ini_value(meta.config, "bn", "eps"), momentum = ini_value(meta.config, "bn", "momentum");
  if (!eps.empty()) mo.bn.eps = std::stof(eps);
  if (!momentum.empty()) mo.bn.momentum = std::stof(momentum);
  return mo;
}

// An imported model's graph: the one the checkpoint stores, else (an older checkpoint) the ONNX file at the
// path it was trained from.
OnnxModel graph_of(const std::string& checkpoint, const CheckpointMeta& meta) {
  if (!meta.graph.onnx.empty()) return restore_onnx_graph(meta.graph.onnx, checkpoint + " (stored graph)");
  struct stat st;
  if (::stat(meta.model.c_str(), &st) != 0)
    raise(kExitCheckpoint, "checkpoint '%s' of model %s stores no graph (it was written before checkpoints stored "
          "an imported model's graph), and that ONNX file cannot be read here (%s): run where the file is, at the "
          "path it was trained from, or resume the run once and use its next checkpoint", checkpoint.c_str(),
          meta.model.c_str(), std::strerror(errno));
  return read_onnx(meta.model);
}

void upload_weights(const std::string& checkpoint, const std::map<std::string, std::vector<float>>& values,
                    CheckpointModel& m) {
  Net& net = *m.net;
  m.params.assign(net.num_params(), 0.f);
  m.buffers.assign(net.num_buffers(), 0.f);
  const auto fill = [&](const std::vector<ParamInfo>& table, std::vector<float>& dst) {
    for (const ParamInfo& p : table) {
      auto it = values.find(p.name);
      if (it == values.end() || it->second.size() != p.size)
        raise(kExitCheckpoint, "checkpoint '%s' has no weights '%s' of %zu values for model %s", checkpoint.c_str(),
              p.name.c_str(), p.size, m.meta.model.c_str());
      std::copy(it->second.begin(), it->second.end(), dst.begin() + static_cast<std::ptrdiff_t>(p.offset));
    }
  };
  fill(net.param_table(), m.params);
  fill(net.buffer_table(), m.buffers);
  m.be->upload(net.params(), m.params.data(), sizeof(float) * m.params.size());
  m.be->upload(net.buffers(), m.buffers.data(), sizeof(float) * m.buffers.size());
  net.sync_weight_copy();
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& checkpoint, const CheckpointLoad& how) {
  CheckpointModel m;
  const auto values = read_checkpoint_weights(checkpoint, how.which, m.meta, how.retry);
  const CheckpointGraph g = input_of(checkpoint, m.meta, how);
  if (!how.be) m.own_be = make_cpu_backend(1);
  m.be = how.be ? how.be : m.own_be.get();
  m.net = std::make_unique<Net>(*m.be, Dims{g.input_h, g.input_w, g.input_c}, g.classes);
  const ModelOptions mo = model_options(m.meta);
  if (is_onnx_model(m.meta.model)) import_onnx(graph_of(checkpoint, m.meta), *m.net, mo.bn);
  else build_model(m.meta.model, *m.net, mo);
  m.net->build(how.max_batch, m.meta.seed);
  upload_weights(checkpoint, values, m);
  return m;
}

std::map<std::string, std::string> export_metadata(const CheckpointModel& m, ExportWeights which) {
  // What the checkpoint recorded (src/checkpoint/model_info.h); an older checkpoint's mean, std and class names
  // from the training set its config names, if it can still be opened.
  ModelInfo info = m.meta.info;
  if (!info.has_stats() || info.class_names.empty()) {
    if (const auto ds = training_set(m.meta)) {
      const DatasetInfo& i = ds->info();
      if (!info.has_stats() && !i.mean.empty() && i.mean.size() == i.std.size()) {
        info.mean.assign(i.mean.begin(), i.mean.end());
        info.std.assign(i.std.begin(), i.std.end());
      }
      if (info.class_names.empty()) info.class_names = i.class_names;
    }
  }
  const Dims& in = m.net->input_dims();
  info.height = in.h, info.width = in.w, info.channels = in.c;
  info.num_classes = m.net->num_classes();
  std::map<std::string, std::string> p = model_info_props(info);
  p["model"] = m.meta.model;
  p["step"] = std::to_string(m.meta.step);
  p["weights"] = export_weights_name(which);
  return p;
}

OnnxModel export_checkpoint_onnx(const std::string& checkpoint, const std::string& out, ExportWeights which) {
  CheckpointLoad how;
  how.which = which;
  const CheckpointModel m = load_checkpoint_model(checkpoint, how);
  OnnxModel onnx = export_onnx(*m.net, m.params.data(), m.buffers.data());
  onnx.producer_name = "cnntrain";
  onnx.producer_version = version_string();
  onnx.graph_name = m.meta.model;
  onnx.metadata = export_metadata(m, which);
  onnx.path = out;
  write_onnx(onnx, out);
  return onnx;
}

}  // namespace cnn
