#include "src/predict/predict_model.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "io/h5_util.h"
#include "src/base/error.h"
#include "src/checkpoint/export.h"
#include "src/model/onnx/onnx_graph_store.h"
#include "src/model/onnx/onnx_import.h"
#include "src/model/zoo.h"
#include "src/train/init_from.h"

namespace cnn {

namespace {

enum class SourceKind { kCheckpoint, kWeights, kOnnx, kSafetensors };

SourceKind source_kind(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    raise(kExitUsage, "predict: cannot read the model source '%s': %s; give a checkpoint (ckpt-*.h5), an ONNX file, "
          "an HDF5 weights export or a safetensors file", path.c_str(), errno ? std::strerror(errno) : "not a file");
  if (is_onnx_model(path)) return SourceKind::kOnnx;
  if (is_safetensors(path)) return SourceKind::kSafetensors;
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle f = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  std::vector<long long> version;
  std::vector<std::string> format;
  if (f.valid() && h5_read_attr_ints(f.get(), "format_version", version)) return SourceKind::kCheckpoint;
  if (f.valid() && h5_read_attr_strings(f.get(), "format", format) && format.size() == 1 &&
      format[0] == "cnntrain-weights")
    return SourceKind::kWeights;
  raise(kExitUsage, "predict: '%s' is neither a cnntrain checkpoint, an HDF5 weights export (cnntrain-data export), "
        "an ONNX file (FILE.onnx) nor a safetensors file", path.c_str());
}

// The dataset paths a tensor may be stored under, the first present one wins.
using PathsOf = std::function<std::vector<std::string>(const std::string& name, bool buffer)>;

// Reads every parameter and buffer of the built `net` from `file` (CRC-32 checked where the file has one).
void load_tensors(const std::string& file, Net& net, const PathsOf& paths_of, int missing_code,
                  const std::string& hint) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle f = h5_file(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) raise(kExitCheckpoint, "predict: cannot open '%s': %s", file.c_str(), h5_last_error().c_str());
  Backend& be = net.backend();
  for (const bool buffer : {false, true}) {
    const auto& table = buffer ? net.buffer_table() : net.param_table();
    std::vector<float> host(buffer ? net.num_buffers() : net.num_params());
    for (const ParamInfo& p : table) {
      std::string path;
      for (const auto& c : paths_of(p.name, buffer))
        if (path.empty() && H5Lexists(f.get(), c.c_str(), H5P_DEFAULT) > 0 &&
            H5Oexists_by_name(f.get(), c.c_str(), H5P_DEFAULT) > 0)
          path = c;
      if (path.empty())
        raise(missing_code, "predict: '%s' has no %s '%s' (looked for %s)%s", file.c_str(),
              buffer ? "buffer" : "parameter", p.name.c_str(), paths_of(p.name, buffer).front().c_str(),
              hint.c_str());
      H5Handle d = h5_dataset(H5Dopen2(f.get(), path.c_str(), H5P_DEFAULT));
      H5Handle sp = h5_space(H5Dget_space(d.get()));
      if (static_cast<size_t>(H5Sget_simple_extent_npoints(sp.get())) != p.size)
        raise(missing_code, "predict: '%s': %s has %lld values, the model's %s needs %zu%s", file.c_str(),
              path.c_str(), (long long)H5Sget_simple_extent_npoints(sp.get()), p.name.c_str(), p.size, hint.c_str());
      float* dst = host.data() + p.offset;
      if (H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
        raise(kExitCheckpoint, "predict: cannot read %s of '%s': %s", path.c_str(), file.c_str(),
              h5_last_error().c_str());
      std::vector<long long> crc;
      if (h5_read_attr_ints(d.get(), "crc32", crc) && crc.size() == 1 &&
          static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(dst), static_cast<uInt>(p.size * 4))) !=
              static_cast<uint32_t>(crc[0]))
        raise(kExitCheckpoint, "predict: checksum mismatch in %s of '%s': the file is corrupt", path.c_str(),
              file.c_str());
    }
    if (host.empty()) continue;
    be.upload(buffer ? net.buffers() : net.params(), host.data(), sizeof(float) * host.size());
  }
  net.sync_weight_copy();
}

Dims input_of(const ModelInfo& info, const ModelInfo& fallback, const std::string& what) {
  const ModelInfo& i = info.has_input_size() ? info : fallback;
  if (!i.has_input_size())
    raise(kExitUsage, "predict: %s records no input size (written before cnntrain stored it), which image files "
          "need; pass --stats-from TRAIN (the training set) or predict on a dataset", what.c_str());
  return Dims{i.height, i.width, i.channels};
}

int classes_of(const ModelInfo& info, const ModelInfo& fallback, const std::string& what) {
  const int n = info.num_classes > 0 ? info.num_classes : fallback.num_classes;
  if (n <= 0)
    raise(kExitUsage, "predict: %s records no class count (written before cnntrain stored it), which image files "
          "need; pass --stats-from TRAIN (the training set) or predict on a dataset", what.c_str());
  return n;
}

PredictModel load_onnx(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  const OnnxModel m = read_onnx(src.path);
  PredictModel pm;
  pm.model = src.path;
  pm.info = model_info_from_props(m.metadata);
  const std::vector<int64_t> in = m.inputs.empty() ? std::vector<int64_t>() : m.inputs[0].dims;
  if (in.size() == 4 && in[1] > 0 && in[2] > 0 && in[3] > 0)
    pm.info.channels = static_cast<int>(in[1]), pm.info.height = static_cast<int>(in[2]),
    pm.info.width = static_cast<int>(in[3]);
  const std::vector<int64_t> out = m.outputs.empty() ? std::vector<int64_t>() : m.outputs[0].dims;
  if (out.size() == 2 && out[1] > 0) pm.info.num_classes = static_cast<int>(out[1]);
  pm.net = std::make_unique<Net>(be, input_of(pm.info, fallback, src.path), classes_of(pm.info, fallback, src.path));
  const OnnxImport imp = import_onnx(m, *pm.net, ModelOptions().bn);
  pm.net->build(max_batch, 0);
  load_onnx_values(imp, *pm.net);
  return pm;
}

PredictModel load_checkpoint(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  CheckpointMeta meta;
  std::string err;
  if (!read_checkpoint_meta(src.path, meta, err)) raise(kExitCheckpoint, "predict: %s", err.c_str());
  if (!src.model.empty() && src.model != meta.model)
    raise(kExitUsage, "predict: checkpoint '%s' holds model %s, not --model %s; leave --model out for a checkpoint",
          src.path.c_str(), meta.model.c_str(), src.model.c_str());
  if (src.weights == "swa" && (meta.swa_models == 0 || meta.swa_bn_models != meta.swa_models))
    raise(kExitCheckpoint, "predict: checkpoint '%s' has no SWA average with batch-norm statistics; use --weights "
          "raw or the final checkpoint of a --train.swa_start_epoch run", src.path.c_str());
  PredictModel pm;
  pm.model = meta.model;
  pm.info = meta.info;
  pm.net = checkpoint_net(meta, src.path, be, input_of(meta.info, fallback, src.path),
                          classes_of(meta.info, fallback, src.path));
  pm.net->build(max_batch, 0);
  const std::string w = src.weights;
  load_tensors(src.path, *pm.net, [&](const std::string& name, bool buffer) -> std::vector<std::string> {
    if (w == "swa") return {(buffer ? "/swa/buffers/" : "/swa/params/") + name};
    if (w == "ema") return buffer ? std::vector<std::string>{"/ema/" + name, "/buffers/" + name}
                                  : std::vector<std::string>{"/ema/" + name};
    return {(buffer ? "/buffers/" : "/params/") + name};
  }, kExitCheckpoint, w == "ema" ? " (--weights ema needs a checkpoint of a --train.ema run)" : "");
  return pm;
}

PredictModel load_weights(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  std::vector<std::string> recorded;
  PredictModel pm;
  {
    std::lock_guard<std::mutex> lk(h5_mutex());
    H5Handle f = h5_file(H5Fopen(src.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    h5_read_attr_strings(f.get(), "model", recorded);
    pm.info = read_model_info(f.get());
  }
  const std::string was = recorded.size() == 1 ? recorded[0] : "";
  pm.model = src.model.empty() ? was : src.model;
  if (!is_model(pm.model))
    raise(kExitUsage, "predict: --model '%s' is not a zoo model; a weights export needs --model with the zoo name it "
          "was trained as%s", pm.model.c_str(), was.empty() ? "" : (" (the file says " + was + ")").c_str());
  pm.net = std::make_unique<Net>(be, input_of(pm.info, fallback, src.path), classes_of(pm.info, fallback, src.path));
  build_model(pm.model, *pm.net);
  pm.net->build(max_batch, 0);
  const std::string hint = strprintf(": the file does not fit model %s%s", pm.model.c_str(),
                                     was.empty() ? "" : (" (it was exported from " + was + ")").c_str());
  load_tensors(src.path, *pm.net, [](const std::string& name, bool) -> std::vector<std::string> {
    std::string p = "/" + name;  // conv1.weight -> /conv1/weight, as export writes it
    const auto dot = p.rfind('.');
    if (dot != std::string::npos) p[dot] = '/';
    return {p};
  }, kExitUsage, hint);
  return pm;
}

std::string comma_list(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A PyTorch state dict (torchvision/timm names, as --init.from reads it): weights only, so --model names the
// architecture, the classifier's weight gives the class count, and the input size comes from the dataset
// predicted on or --stats-from. Every parameter and statistic must come from the file.
PredictModel load_safetensors(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  if (!is_model(src.model))
    raise(kExitUsage, "predict: '%s' is a safetensors file, which holds weights only: name its architecture with "
          "--model (a zoo model, e.g. resnet50)%s", src.path.c_str(),
          src.model.empty() ? "" : (", not '" + src.model + "'").c_str());
  if (!fallback.has_input_size())
    raise(kExitUsage, "predict: the safetensors file '%s' records no input size, mean/std or class names: predict "
          "on a dataset (HDF5 or LMDB; its image size and statistics are used) or pass --stats-from TRAIN, the "
          "dataset the weights were trained on", src.path.c_str());
  const std::vector<NamedTensor> tensors = read_safetensors_weights(src.path);
  Net probe(be, Dims{fallback.height, fallback.width, fallback.channels}, 1);
  build_model(src.model, probe);
  const std::string head = probe.layers().back()->name() + ".weight";
  const auto fc = std::find_if(tensors.begin(), tensors.end(), [&](const NamedTensor& t) { return t.name == head; });
  if (fc == tensors.end() || fc->shape.size() != 2)
    raise(kExitUsage, "predict: '%s' has no 2-D classifier weight '%s' of model %s: weights of another model?",
          src.path.c_str(), head.c_str(), src.model.c_str());
  PredictModel pm;
  pm.model = src.model;
  pm.net = std::make_unique<Net>(be, Dims{fallback.height, fallback.width, fallback.channels},
                                 static_cast<int>(fc->shape[0]));
  build_model(pm.model, *pm.net);
  pm.net->build(max_batch, 0);
  const InitFromReport r = load_named_tensors(*pm.net, tensors, NamePattern());
  if (!r.missing.empty() || !r.mismatched.empty())
    raise(kExitUsage, "predict: '%s' does not hold every tensor of model %s; missing: %s; of another shape: %s",
          src.path.c_str(), src.model.c_str(), r.missing.empty() ? "none" : comma_list(r.missing).c_str(),
          r.mismatched.empty() ? "none" : comma_list(r.mismatched).c_str());
  return pm;
}

}  // namespace

// Imported models are rebuilt from the ONNX file the checkpoint recorded (its path at training time).
std::unique_ptr<Net> checkpoint_net(const CheckpointMeta& meta, const std::string& checkpoint, Backend& be,
                                    const Dims& input, int classes) {
  auto net = std::make_unique<Net>(be, input, classes);
  if (!is_onnx_model(meta.model)) {
    build_model(meta.model, *net);
    return net;
  }
  // The graph the checkpoint stores (checkpoints written since they store it), else the file it was trained from.
  if (!meta.graph.onnx.empty()) {
    import_onnx(restore_onnx_graph(meta.graph.onnx, checkpoint + " (stored graph)"), *net, ModelOptions().bn);
    return net;
  }
  struct stat st;
  if (::stat(meta.model.c_str(), &st) != 0)
    raise(kExitCheckpoint, "checkpoint '%s' is of the imported model %s, which cannot be read here (%s); run where "
          "the ONNX file is, at the path it was trained from", checkpoint.c_str(), meta.model.c_str(),
          std::strerror(errno));
  import_onnx(read_onnx(meta.model), *net, ModelOptions().bn);
  return net;
}

PredictModel load_predict_model(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  PredictModel pm;
  switch (source_kind(src.path)) {
    case SourceKind::kOnnx: pm = load_onnx(src, be, fallback, max_batch); break;
    case SourceKind::kCheckpoint: pm = load_checkpoint(src, be, fallback, max_batch); break;
    case SourceKind::kWeights: pm = load_weights(src, be, fallback, max_batch); break;
    case SourceKind::kSafetensors: pm = load_safetensors(src, be, fallback, max_batch); break;
  }
  const Dims& in = pm.net->input_dims();
  pm.info.height = in.h, pm.info.width = in.w, pm.info.channels = in.c;
  pm.info.num_classes = pm.net->num_classes();
  return pm;
}

}  // namespace cnn
