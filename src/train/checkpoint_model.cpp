#include "src/train/checkpoint_model.h"

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

CheckpointGraph input_of(const std::string& checkpoint, const CheckpointMeta& meta) {
  if (meta.graph.has_input()) return meta.graph;
  CheckpointGraph g = meta.graph;
  const std::string size = ini_value(meta.config, "data", "image_size");
  if (auto ds = training_set(meta)) {
    const DatasetInfo& i = ds->info();
    g.input_h = i.height, g.input_w = i.width, g.input_c = i.channels, g.classes = i.num_classes;
    if (!size.empty()) std::sscanf(size.c_str(), "%dx%d", &g.input_h, &g.input_w);
  }
  if (!g.has_input())
    raise(kExitCheckpoint, "checkpoint '%s' was written before checkpoints stored the network's input shape, and "
          "the training set its config names ('%s') cannot be opened to tell it: make that file available",
          checkpoint.c_str(), ini_value(meta.config, "data", "train").c_str());
  return g;
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

CheckpointModel load_checkpoint_model(const std::string& checkpoint, ExportWeights which, int max_batch) {
  CheckpointModel m;
  const auto values = read_checkpoint_weights(checkpoint, which, m.meta);
  const CheckpointGraph g = input_of(checkpoint, m.meta);
  m.be = make_cpu_backend(1);
  m.net = std::make_unique<Net>(*m.be, Dims{g.input_h, g.input_w, g.input_c}, g.classes);
  ModelOptions mo;
  if (!ini_value(m.meta.config, "bn", "eps").empty()) mo.bn.eps = std::stof(ini_value(m.meta.config, "bn", "eps"));
  if (!ini_value(m.meta.config, "bn", "momentum").empty())
    mo.bn.momentum = std::stof(ini_value(m.meta.config, "bn", "momentum"));
  if (!is_onnx_model(m.meta.model)) {
    build_model(m.meta.model, *m.net, mo);
  } else if (g.onnx.empty()) {
    raise(kExitCheckpoint, "checkpoint '%s' of model %s stores no graph (it was written before checkpoints stored "
          "an imported model's graph); resume the run once and use its next checkpoint", checkpoint.c_str(),
          m.meta.model.c_str());
  } else {
    import_onnx(restore_onnx_graph(g.onnx, checkpoint + " (stored graph)"), *m.net, mo.bn);
  }
  m.net->build(max_batch, m.meta.seed);
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
  const CheckpointModel m = load_checkpoint_model(checkpoint, which);
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
