#include "src/train/init_from.h"

#include <cstring>
#include <fstream>
#include <map>

#include "io/h5_util.h"
#include "src/base/error.h"
#include "src/model/onnx/onnx_model.h"
#include "src/train/freeze.h"

namespace cnn {

namespace {

// OIHW (PyTorch, ONNX) -> KRSC (cnntrain) for 4-D tensors; others are laid out alike.
void pytorch_to_cnntrain(NamedTensor& t) {
  if (t.shape.size() != 4) return;
  const int64_t K = t.shape[0], C = t.shape[1], R = t.shape[2], S = t.shape[3];
  std::vector<float> v(t.data.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) v[((k * R + r) * S + s) * C + c] = t.data[((k * C + c) * R + r) * S + s];
  t.data.swap(v);
  t.shape = {K, R, S, C};
}

struct H5Walk {
  std::vector<NamedTensor>* out;
  bool checkpoint;
};

herr_t visit_link(hid_t group, const char* path, const H5L_info_t*, void* arg) {
  H5Walk& w = *static_cast<H5Walk*>(arg);
  std::string name = path;
  if (w.checkpoint) {
    // Only the trained weights and the running statistics; optimizer state and averages stay behind.
    if (name.compare(0, 7, "params/") == 0) name = name.substr(7);
    else if (name.compare(0, 8, "buffers/") == 0) name = name.substr(8);
    else return 0;
  }
  H5Handle d = h5_dataset(H5Dopen2(group, path, H5P_DEFAULT));
  if (!d.valid()) return 0;  // a group
  H5Handle sp = h5_space(H5Dget_space(d.get()));
  const int rank = H5Sget_simple_extent_ndims(sp.get());
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(sp.get(), dims.data(), nullptr);
  NamedTensor t;
  for (char& c : name) c = c == '/' ? '.' : c;  // an export's /layer1.0.conv1/weight
  t.name = name;
  size_t n = 1;
  for (hsize_t x : dims) t.shape.push_back(static_cast<int64_t>(x)), n *= x;
  t.data.resize(n);
  if (H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()) < 0) return -1;
  w.out->push_back(std::move(t));
  return 0;
}

std::vector<NamedTensor> read_hdf5_weights(const std::string& path, std::string* format) {
  std::lock_guard<std::mutex> lock(h5_mutex());
  h5_quiet();
  H5Handle f = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid())
    raise(kExitUsage, "--init.from '%s': cannot open the HDF5 file: %s", path.c_str(), h5_last_error().c_str());
  std::vector<NamedTensor> out;
  H5Walk w{&out, H5Lexists(f.get(), "/params", H5P_DEFAULT) > 0};
  *format = w.checkpoint ? "checkpoint" : "hdf5 export";
  if (H5Lvisit(f.get(), H5_INDEX_NAME, H5_ITER_INC, visit_link, &w) < 0)
    raise(kExitUsage, "--init.from '%s': cannot read its datasets: %s", path.c_str(), h5_last_error().c_str());
  return out;
}

std::vector<NamedTensor> read_onnx_weights(const std::string& path) {
  std::vector<NamedTensor> out;
  for (const OnnxTensor& t : read_onnx(path, {}).initializers) {
    if (!t.is_float()) continue;
    out.push_back({t.name, t.dims, t.floats});
    pytorch_to_cnntrain(out.back());
  }
  return out;
}

bool has_prefix(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

// Without DataParallel's "module." wrapper and the batch norms' step counters, which no model holds.
std::vector<NamedTensor> drop_wrappers(std::vector<NamedTensor> ts) {
  std::vector<NamedTensor> out;
  for (NamedTensor& t : ts) {
    if (has_prefix(t.name, "module.")) t.name = t.name.substr(7);
    if (t.name.size() > 20 && t.name.compare(t.name.size() - 20, 20, ".num_batches_tracked") == 0) continue;
    out.push_back(std::move(t));
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r;
  for (int64_t d : s) r += (r.empty() ? "" : "x") + std::to_string(d);
  return r.empty() ? "scalar" : r;
}

// Copies the file's tensors into `host` (the flat array `table` describes); reports what it could not.
void match(const std::vector<ParamInfo>& table, const std::map<std::string, const NamedTensor*>& file,
           const NamePattern& skip, float* host, InitFromReport& r, std::map<std::string, bool>& used) {
  for (const ParamInfo& p : table) {
    auto it = file.find(p.name);
    if (it == file.end()) {
      r.missing.push_back(p.name);
      continue;
    }
    used[p.name] = true;
    if (skip.matches(p.name)) {
      r.skipped.push_back(p.name);
      continue;
    }
    const std::vector<int64_t> want(p.shape.begin(), p.shape.end());
    if (it->second->shape != want) {
      r.mismatched.push_back(strprintf("%s: file %s, model %s", p.name.c_str(), shape_str(it->second->shape).c_str(),
                                       shape_str(want).c_str()));
      continue;
    }
    std::copy(it->second->data.begin(), it->second->data.end(), host + p.offset);
    ++r.loaded;
  }
}

std::string listing(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::vector<std::string> InitFromReport::fresh() const {
  std::vector<std::string> v = missing;
  for (const std::string& m : mismatched) v.push_back(m.substr(0, m.find(':')));
  v.insert(v.end(), skipped.begin(), skipped.end());
  return v;
}

std::vector<NamedTensor> read_safetensors_weights(const std::string& path) {
  std::vector<NamedTensor> ts = read_safetensors(path).tensors;
  for (NamedTensor& t : ts) pytorch_to_cnntrain(t);
  return drop_wrappers(std::move(ts));
}

std::vector<NamedTensor> read_weight_file(const std::string& path, std::string* format) {
  char magic[8] = {};
  std::ifstream f(path, std::ios::binary);
  if (!f) raise(kExitUsage, "option --init.from: cannot open '%s'", path.c_str());
  f.read(magic, sizeof magic);
  if (std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0) return drop_wrappers(read_hdf5_weights(path, format));
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) {
    *format = "onnx";
    return drop_wrappers(read_onnx_weights(path));
  }
  *format = "safetensors";
  return read_safetensors_weights(path);
}

InitFromReport load_named_tensors(Net& net, const std::vector<NamedTensor>& tensors, const NamePattern& skip) {
  InitFromReport r;
  std::map<std::string, const NamedTensor*> file;
  for (const NamedTensor& t : tensors) file[t.name] = &t;
  Backend& be = net.backend();
  std::vector<float> params(net.num_params()), buffers(net.num_buffers());
  be.download(params.data(), static_cast<const Net&>(net).params(), sizeof(float) * params.size());
  be.download(buffers.data(), net.buffers(), sizeof(float) * buffers.size());
  std::map<std::string, bool> used;
  match(net.param_table(), file, skip, params.data(), r, used);
  match(net.buffer_table(), file, skip, buffers.data(), r, used);
  for (const auto& kv : file)
    if (!used.count(kv.first)) r.unused.push_back(kv.first);
  be.upload(net.params(), params.data(), sizeof(float) * params.size());
  be.upload(net.buffers(), buffers.data(), sizeof(float) * buffers.size());
  net.sync_weight_copy();
  return r;
}

InitFromReport init_from_file(Net& net, const InitFromOptions& o) {
  std::string format;
  const std::vector<NamedTensor> tensors = read_weight_file(o.path, &format);
  InitFromReport r = load_named_tensors(net, tensors, NamePattern(o.skip, "init.skip"));
  r.format = format;
  if (r.loaded == 0)
    raise(kExitUsage, "option --init.from: no tensor of '%s' (%s, %zu tensors, e.g. '%s') matches a parameter of "
          "the model by name and shape (e.g. '%s'): another model?", o.path.c_str(), r.format.c_str(), tensors.size(),
          tensors.empty() ? "-" : tensors.front().name.c_str(),
          net.param_table().empty() ? "-" : net.param_table().front().name.c_str());
  if (o.strict && (!r.missing.empty() || !r.mismatched.empty()))
    raise(kExitUsage, "option --init.strict: '%s' does not initialise every tensor of the model; missing: %s; of "
          "another shape: %s (--init.skip NAMES re-initialises some on purpose)", o.path.c_str(),
          r.missing.empty() ? "none" : listing(r.missing).c_str(),
          r.mismatched.empty() ? "none" : listing(r.mismatched).c_str());
  return r;
}

}  // namespace cnn
