#include "src/predict/predict.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>

#include "io/h5_util.h"
#include "io/loader.h"
#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "src/predict/predict_input.h"

namespace cnn {

namespace {

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// Mean/std as training normalised: the model's record, else --stats-from's, else the input dataset's own.
void choose_stats(const PredictModel& m, const ModelInfo& fallback, const PredictInput& in, const PredictOptions& o,
                  std::vector<float>& mean, std::vector<float>& sd) {
  const DatasetInfo* d = in.dataset();
  const ModelInfo& src = m.info.has_stats() ? m.info : fallback;
  if (src.has_stats()) {
    mean.assign(src.mean.begin(), src.mean.end());
    sd.assign(src.std.begin(), src.std.end());
  } else if (d && !d->mean.empty()) {
    mean = d->mean, sd = d->std;
  } else {
    raise(kExitUsage, "predict: '%s' records no mean/std (written before cnntrain stored them), which image files "
          "need; pass --stats-from TRAIN (the training set) or predict on a dataset", o.source.path.c_str());
  }
  if (static_cast<int>(mean.size()) != m.info.channels)
    raise(kExitData, "predict: %zu-channel mean/std for a %d-channel model", mean.size(), m.info.channels);
}

void write_h5(const std::string& out, const PredictOptions& o, const PredictResult& r, const std::vector<float>& logits,
              const std::vector<int32_t>& labels, const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  const std::string tmp = out + ".tmp";
  H5Handle f = h5_file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.valid())
    raise(kExitUsage, "predict: cannot create '%s': %s (check --out)", tmp.c_str(), h5_last_error().c_str());
  auto put = [&](const char* name, hid_t type, hid_t mem, std::vector<hsize_t> dims, const void* data) {
    H5Handle sp = h5_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    H5Handle d = h5_dataset(H5Dcreate2(f.get(), name, type, sp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!d.valid() || H5Dwrite(d.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
      raise(kExitFailure, "predict: writing %s to '%s' failed: %s", name, tmp.c_str(), h5_last_error().c_str());
  };
  const hsize_t n = static_cast<hsize_t>(r.count), c = static_cast<hsize_t>(r.classes);
  put("logits", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, c}, logits.data());
  if (r.labelled) put("labels", H5T_STD_I32LE, H5T_NATIVE_INT32, {n}, labels.data());
  h5_write_attr_strings(f.get(), "model", {r.model});
  h5_write_attr_strings(f.get(), "source", {o.source.path});
  if (!names.empty()) h5_write_attr_strings(f.get(), "class_names", names);
  if (f.close() < 0) raise(kExitFailure, "predict: closing '%s' failed: %s", tmp.c_str(), h5_last_error().c_str());
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    raise(kExitFailure, "predict: cannot rename '%s' to '%s': %s", tmp.c_str(), out.c_str(), std::strerror(errno));
}

// Quotes a CSV field when it holds a comma, quote or line break (RFC 4180).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

void write_csv(const std::string& out, const PredictOptions& o, const PredictInput& in, const PredictResult& r,
               const std::vector<float>& logits, const std::vector<int32_t>& labels,
               const std::vector<std::string>& names) {
  const std::string tmp = out + ".tmp";
  std::ofstream f(tmp);
  if (!f) raise(kExitUsage, "predict: cannot create '%s': %s (check --out)", tmp.c_str(), std::strerror(errno));
  const int k = std::min(o.topk, r.classes);
  f << (in.dataset() ? "index" : "path") << (r.labelled ? ",label" : "");
  for (int j = 1; j <= k; ++j) f << ",class" << j << ",name" << j << ",prob" << j;
  f << "\n";
  std::vector<int> order(r.classes);
  std::vector<double> p(r.classes);
  for (int64_t i = 0; i < r.count; ++i) {
    const float* z = logits.data() + i * r.classes;
    const float zmax = *std::max_element(z, z + r.classes);
    double sum = 0;
    for (int c = 0; c < r.classes; ++c) sum += p[c] = std::exp(static_cast<double>(z[c]) - zmax);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return p[a] > p[b]; });
    f << csv_field(in.name(i));
    if (r.labelled) f << "," << labels[i];
    for (int j = 0; j < k; ++j)
      f << "," << order[j] << "," << csv_field(order[j] < static_cast<int>(names.size()) ? names[order[j]] : "")
        << "," << strprintf("%.6f", p[order[j]] / sum);
    f << "\n";
  }
  f.close();
  if (!f.good()) raise(kExitFailure, "predict: writing '%s' failed (disk full?)", tmp.c_str());
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    raise(kExitFailure, "predict: cannot rename '%s' to '%s': %s", tmp.c_str(), out.c_str(), std::strerror(errno));
}

}  // namespace

PredictResult run_predict(const PredictOptions& o) {
  const bool csv = ends_with(o.out, ".csv");
  if (!csv && !ends_with(o.out, ".h5") && !ends_with(o.out, ".hdf5"))
    raise(kExitUsage, "predict: --out '%s': name an .h5 (logits) or a .csv (top-k classes) file", o.out.c_str());
  if (o.topk < 1) raise(kExitUsage, "predict: --topk %d: give at least 1", o.topk);
  ModelInfo fallback;
  DatasetInfo d;
  if (!o.stats_from.empty() || peek_dataset_info(o.input, d)) {
    if (!o.stats_from.empty() && !peek_dataset_info(o.stats_from, d))
      raise(kExitUsage, "predict: --stats-from '%s' is not a dataset (HDF5 or LMDB)", o.stats_from.c_str());
    fallback = model_info_of(d, d.height, d.width, d.channels);
    if (o.stats_from.empty()) fallback.mean.clear(), fallback.std.clear();  // the input's own: a last resort
  }
  std::unique_ptr<Backend> be = make_cpu_backend(o.threads);
  PredictModel m = load_predict_model(o.source, *be, fallback, o.batch);
  std::unique_ptr<PredictInput> in = open_predict_input(o.input, m.info.height, m.info.width, m.info.channels,
                                                        o.test_resize);
  std::vector<float> mean, sd;
  choose_stats(m, fallback, *in, o, mean, sd);
  PredictResult r;
  r.count = in->count();
  r.classes = m.net->num_classes();
  r.labelled = in->dataset() != nullptr;
  r.model = m.model;
  const size_t px = static_cast<size_t>(m.info.height) * m.info.width * m.info.channels;
  std::vector<uint8_t> raw(px * o.batch);
  std::vector<float> x(px * o.batch), logits(static_cast<size_t>(r.count) * r.classes);
  std::vector<int32_t> labels(r.count);
  float* dx = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  for (int64_t i = 0; i < r.count; i += o.batch) {
    const int n = static_cast<int>(std::min<int64_t>(o.batch, r.count - i));
    in->read(i, n, raw.data(), labels.data() + i);
    normalize_images(raw.data(), static_cast<size_t>(n) * m.info.height * m.info.width, m.info.channels, mean, sd,
                     x.data());
    be->upload(dx, x.data(), sizeof(float) * px * n);
    const void* z = m.net->forward(dx, n, false);
    be->download(logits.data() + i * r.classes, z, sizeof(float) * n * r.classes);
    for (int j = 0; r.labelled && j < n; ++j) {
      const float* row = logits.data() + (i + j) * r.classes;
      r.correct += std::max_element(row, row + r.classes) - row == labels[i + j];
    }
  }
  be->release(dx);
  // The model's class names, else --stats-from's, else the input dataset's.
  const std::vector<std::string>& names = !m.info.class_names.empty()                    ? m.info.class_names
                                          : !fallback.class_names.empty() || !in->dataset() ? fallback.class_names
                                                                                          : in->dataset()->class_names;
  if (csv) write_csv(o.out, o, *in, r, logits, labels, names);
  else write_h5(o.out, o, r, logits, labels, names);
  return r;
}

}  // namespace cnn
