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
#include "src/model/onnx/onnx_import.h"
#include "src/model/zoo.h"
#include "src/train/checkpoint_model.h"
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

// Where a weights export stores a tensor: conv1.weight -> /conv1/weight.
std::string export_path(const std::string& name) {
  std::string p = "/" + name;
  const auto dot = p.rfind('.');
  if (dot != std::string::npos) p[dot] = '/';
  return p;
}

// Reads every parameter and buffer of the built `net` from the weights export `file` (CRC-32 checked where
// the file has one); `hint` ends the message about a tensor the file lacks or has of another size.
void load_export_tensors(const std::string& file, Net& net, const std::string& hint) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle f = h5_file(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) raise(kExitCheckpoint, "predict: cannot open '%s': %s", file.c_str(), h5_last_error().c_str());
  Backend& be = net.backend();
  for (const bool buffer : {false, true}) {
    const auto& table = buffer ? net.buffer_table() : net.param_table();
    std::vector<float> host(buffer ? net.num_buffers() : net.num_params());
    for (const ParamInfo& p : table) {
      const std::string path = export_path(p.name);
      if (H5Lexists(f.get(), path.c_str(), H5P_DEFAULT) <= 0 ||
          H5Oexists_by_name(f.get(), path.c_str(), H5P_DEFAULT) <= 0)
        raise(kExitUsage, "predict: '%s' has no %s '%s' (looked for %s)%s", file.c_str(),
              buffer ? "buffer" : "parameter", p.name.c_str(), path.c_str(), hint.c_str());
      H5Handle d = h5_dataset(H5Dopen2(f.get(), path.c_str(), H5P_DEFAULT));
      H5Handle sp = h5_space(H5Dget_space(d.get()));
      if (static_cast<size_t>(H5Sget_simple_extent_npoints(sp.get())) != p.size)
        raise(kExitUsage, "predict: '%s': %s has %lld values, the model's %s needs %zu%s", file.c_str(),
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

// The checkpoint's own network and weights (src/train/checkpoint_model.h) on the predict backend; an older
// checkpoint's input size and class count, if even its training set is gone, from the dataset or --stats-from.
PredictModel load_checkpoint(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch) {
  CheckpointMeta meta;
  std::string err;
  if (!read_checkpoint_meta(src.path, meta, err)) raise(kExitCheckpoint, "predict: %s", err.c_str());
  if (!src.model.empty() && src.model != meta.model)
    raise(kExitUsage, "predict: checkpoint '%s' holds model %s, not --model %s; leave --model out for a checkpoint",
          src.path.c_str(), meta.model.c_str(), src.model.c_str());
  CheckpointLoad how;
  how.which = src.weights;
  how.max_batch = max_batch;
  how.be = &be;
  how.retry = "predict from it";
  how.fallback = fallback;
  how.fallback_option = "--stats-from TRAIN (the training set), or predict on a dataset";
  CheckpointModel m = load_checkpoint_model(src.path, how);
  PredictModel pm;
  pm.model = m.meta.model;
  pm.info = m.meta.info;
  pm.net = std::move(m.net);
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
  load_export_tensors(src.path, *pm.net, hint);
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
