#include "io/lmdb_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <thread>

#include "io/lmdb_datum.h"
#include "io/lmdb_env.h"
#include "io/lmdb_meta.h"
#include "src/base/error.h"

namespace cnn {

namespace {

// What to do about images of several sizes, in the words of the two programs that read LMDBs.
const char* const kSizeHint = "give a target size to resize every image to (cnntrain --data.image_size HxW, "
                              "cnntrain-data convert-lmdb-hdf5 --size HxW)";

// Keys are arbitrary bytes; messages must stay printable.
std::string printable(const std::string& key) {
  std::string s;
  for (unsigned char ch : key) s += (ch >= 0x20 && ch < 0x7f) ? std::string(1, ch) : strprintf("\\x%02x", ch);
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

// Every rank opens the same database; one copy of each warning (is_log_rank()) is enough.
constexpr int64_t kMaxLoggedSkips = 10;
constexpr int kMaxConsecutiveBad = 100;

}  // namespace

LmdbDataset::LmdbDataset(const std::string& path, const LmdbOptions& options) : path_(path), opt_(options) {
  if (opt_.on_bad_sample != "fail" && opt_.on_bad_sample != "skip")
    raise(kExitUsage, "on_bad_sample is '%s'; use fail or skip", opt_.on_bad_sample.c_str());
  skip_bad_ = opt_.on_bad_sample == "skip";
  const ImageTransform& t = opt_.transform;
  if ((t.height > 0) != (t.width > 0) || t.height < 0 || t.width < 0)
    raise(kExitUsage, "LMDB %s: target size %dx%d: give both height and width, or neither", path.c_str(),
          t.height, t.width);
  if (t.height == 0 && t.mode != ResizeMode::kNone)
    raise(kExitUsage, "LMDB %s: a resize or crop mode needs a target size (height and width)", path.c_str());
  if (opt_.channels != 0 && opt_.channels != 1 && opt_.channels != 3)
    raise(kExitUsage, "LMDB %s: channels must be 0 (as stored), 1 or 3, not %d", path.c_str(), opt_.channels);
  env_.reset(new LmdbReadEnv(path));
  build_index();
  compute_stats(opt_.stats_samples);
}

LmdbDataset::~LmdbDataset() = default;

std::string LmdbDataset::key(int64_t id) const {
  uint64_t b = id == 0 ? 0 : key_end_[id - 1];
  return keys_.substr(b, key_end_[id] - b);
}

std::string LmdbDataset::describe(int64_t id) const {
  const std::string k = key(id);
  LmdbReadEnv::Txn txn(*env_);
  const uint8_t* val;
  size_t len;
  DatumHeader h;
  if (!txn.get(k.data(), k.size(), &val, &len)) return "missing";
  std::string why = scan_datum(val, len, &h);
  if (!why.empty()) return "not a Datum (" + why + ")";
  if (!h.encoded)
    return strprintf("raw %dx%dx%d (CxHxW) %s", h.channels, h.height, h.width, h.data_bytes ? "data" : "float_data");
  int ih = 0, iw = 0, ic = 0;
  why = probe_image(h.data, h.data_bytes, &ih, &iw, &ic);
  const ImageFormat f = sniff_image_format(h.data, h.data_bytes);
  return why.empty() ? strprintf("%s %dx%dx%d (HxWxC), %llu bytes", f == ImageFormat::kJpeg ? "JPEG" : "PNG", ih,
                                 iw, ic, static_cast<unsigned long long>(h.data_bytes))
                     : "encoded, " + why;
}

std::string LmdbDataset::read_record(int64_t id, uint8_t* out) const {
  const std::string k = key(id);
  LmdbReadEnv::Txn txn(*env_);
  const uint8_t* val;
  size_t len;
  return txn.get(k.data(), k.size(), &val, &len) ? decode_record(id, val, len, out) : "missing";
}

void LmdbDataset::bad_at_open(const std::string& key, const std::string& why) {
  if (!skip_bad_)
    raise(kExitData, "LMDB %s: record with key '%s': %s; fix or rebuild the database, or set "
          "--data.on_bad_sample skip to leave such records out", path_.c_str(), printable(key).c_str(),
          why.c_str());
  if (skipped_open_++ < kMaxLoggedSkips && is_log_rank())
    std::fprintf(stderr, "cnntrain: warning: LMDB %s: skipping record with key '%s': %s\n", path_.c_str(),
                 printable(key).c_str(), why.c_str());
}

namespace {

// The record's channels and size (encoded images probed, not decoded), or what makes it unusable.
std::string record_shape(const DatumHeader& h, int want_channels, int* c, int* ih, int* iw) {
  if (h.encoded) {
    if (h.data_bytes == 0) return "encoded record without image bytes";
    std::string why = probe_image(h.data, h.data_bytes, ih, iw, c);
    if (!why.empty()) return "encoded image: " + why;
    if (want_channels) *c = want_channels;
    return "";
  }
  std::string why = check_raw_datum(h);
  if (!why.empty()) return why;
  *c = h.channels, *ih = h.height, *iw = h.width;
  if (want_channels && *c != want_channels)
    return strprintf("raw record has %d channels but %d were asked for; raw records are not converted", *c,
                     want_channels);
  return "";
}

}  // namespace

void LmdbDataset::index_record(const std::string& key, const uint8_t* val, size_t len, FirstShape& first,
                               int64_t& max_label) {
  DatumHeader h;
  std::string why = scan_datum(val, len, &h);
  if (!why.empty()) return bad_at_open(key, "the value is not a Caffe Datum (" + why + ")");
  int c, ih, iw;
  why = record_shape(h, opt_.channels, &c, &ih, &iw);
  if (!why.empty()) return bad_at_open(key, why);
  any_encoded_ = any_encoded_ || h.encoded;
  if (first.known && c != first.c)
    return bad_at_open(key, strprintf("record has %d channels but the first record has %d; set the channels "
                                      "option to convert encoded images", c, first.c));
  if (first.known && (ih != first.h || iw != first.w)) mixed_sizes_ = true;
  if (first.known && opt_.transform.height <= 0 && !h.encoded && (ih != first.h || iw != first.w))
    return bad_at_open(key, strprintf("record is %dx%dx%d (CxHxW) but the first record is %dx%dx%d; %s", c, ih, iw,
                                      first.c, first.h, first.w, kSizeHint));
  if (!first.known) first = {c, ih, iw, true};
  if (h.label < 0 || (opt_.num_classes > 0 && h.label >= opt_.num_classes))
    return bad_at_open(key, strprintf("label %d is outside [0, %d)", h.label,
                                      opt_.num_classes > 0 ? opt_.num_classes : INT32_MAX));
  keys_ += key;
  key_end_.push_back(keys_.size());
  labels_.push_back(h.label);
  max_label = std::max<int64_t>(max_label, h.label);
}

void LmdbDataset::drop_labels_beyond_classes() {
  std::string keys;
  std::vector<uint64_t> ends;
  std::vector<int32_t> labels;
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] >= info_.num_classes) {
      bad_at_open(key(i), strprintf("label %d is outside [0, %d) (num_classes from %s)", labels_[i],
                                    info_.num_classes, env_->meta_path().c_str()));
      continue;
    }
    keys += key(i);
    ends.push_back(keys.size());
    labels.push_back(labels_[i]);
  }
  keys_.swap(keys), key_end_.swap(ends), labels_.swap(labels);
  if (labels_.empty()) raise(kExitData, "LMDB %s: no record has a label below num_classes %d (from %s)",
                             path_.c_str(), info_.num_classes, env_->meta_path().c_str());
}

void LmdbDataset::build_index() {
  const uint64_t entries = env_->entries();
  if (entries == 0)
    raise(kExitData, "LMDB %s is empty (0 records); check the path or convert the dataset again", path_.c_str());
  LmdbMeta meta;
  const bool have_meta = read_lmdb_meta(env_->meta_path(), &meta);
  const bool target = opt_.transform.height > 0;
  FirstShape first;
  int64_t max_label = -1;
  key_end_.reserve(entries);
  labels_.reserve(entries);
  LmdbReadEnv::Txn txn(*env_);
  txn.for_each([&](const std::string& key, const uint8_t* val, size_t len) {
    index_record(key, val, len, first, max_label);
    return true;
  });
  if (labels_.empty())
    raise(kExitData, "LMDB %s: none of its %llu records is usable (%lld skipped); check that it holds Caffe "
          "Datum records", path_.c_str(), static_cast<unsigned long long>(entries),
          static_cast<long long>(skipped_open_));

  info_.num_classes = opt_.num_classes > 0        ? opt_.num_classes
                      : have_meta && meta.num_classes > 0 ? meta.num_classes
                                                          : static_cast<int>(max_label + 1);
  if (max_label >= info_.num_classes) drop_labels_beyond_classes();  // only a sidecar's num_classes can be exceeded
  keys_.shrink_to_fit();
  key_end_.shrink_to_fit();
  labels_.shrink_to_fit();

  info_.count = static_cast<int64_t>(labels_.size());
  info_.channels = first.c;
  info_.height = target ? opt_.transform.height : first.h;
  info_.width = target ? opt_.transform.width : first.w;
  fixed_size_ = !target;
  opt_.transform.height = info_.height;
  opt_.transform.width = info_.width;
  if (have_meta) {
    if (!meta.class_names.empty() && static_cast<int>(meta.class_names.size()) != info_.num_classes)
      raise(kExitData, "%s lists %zu class names but the dataset has %d classes; fix or delete the file",
            env_->meta_path().c_str(), meta.class_names.size(), info_.num_classes);
    info_.class_names = meta.class_names;
    if (static_cast<int>(meta.mean.size()) == info_.channels && meta.std.size() == meta.mean.size())
      info_.mean = meta.mean, info_.std = meta.std;
  }
  if (skipped_open_ > 0 && is_log_rank())
    std::fprintf(stderr, "cnntrain: warning: LMDB %s: skipped %lld bad records of %llu\n", path_.c_str(),
                 static_cast<long long>(skipped_open_), static_cast<unsigned long long>(entries));
}

void LmdbDataset::compute_stats(int samples) {
  const int c = info_.channels;
  if (!info_.mean.empty()) return;
  if (samples < 0) samples = any_encoded_ ? 512 : 4096;  // decoding JPEGs at open costs ~ms each
  if (samples == 0) {
    info_.mean.assign(c, 0.0f);
    info_.std.assign(c, 1.0f);
    return;
  }
  const int64_t n = std::min<int64_t>(samples, info_.count);
  std::vector<double> sum(c, 0.0), sq(c, 0.0);
  std::vector<uint8_t> img(info_.sample_bytes());
  int64_t used = 0;
  LmdbReadEnv::Txn txn(*env_);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = i * info_.count / n;
    const std::string k = key(id);
    const uint8_t* val;
    size_t len;
    std::string why = txn.get(k.data(), k.size(), &val, &len) ? decode_record(id, val, len, img.data())
                                                               : "key vanished from the database";
    if (!why.empty()) {
      if (!skip_bad_)
        raise(kExitData, "LMDB %s: record %lld (key '%s'): %s; fix or rebuild the database, or set "
              "--data.on_bad_sample skip", path_.c_str(), static_cast<long long>(id), printable(k).c_str(),
              why.c_str());
      continue;  // counted when the trainer reads it
    }
    for (size_t p = 0; p < img.size(); ++p) {
      double v = img[p];
      sum[p % c] += v;
      sq[p % c] += v * v;
    }
    ++used;
  }
  const double per_channel = static_cast<double>(used) * info_.height * info_.width;
  for (int k = 0; k < c; ++k) {
    double m = per_channel > 0 ? sum[k] / per_channel : 0.0;
    double var = per_channel > 0 ? sq[k] / per_channel - m * m : 1.0;
    info_.mean.push_back(static_cast<float>(m));
    // A constant channel gets std 1, as the HDF5 reader does, instead of blowing up the normalisation.
    info_.std.push_back(static_cast<float>(var > 1e-6 ? std::sqrt(var) : 1.0));
  }
}

std::string LmdbDataset::decode_record(int64_t id, const uint8_t* val, size_t len, uint8_t* out) const {
  thread_local Datum d;
  thread_local Image img;
  thread_local std::vector<uint8_t> planar;
  if (!parse_datum(val, len, &d)) return "the value is not a Caffe Datum (protobuf cannot parse it)";
  const int c = info_.channels;
  if (d.encoded) {
    std::string why = decode_image(reinterpret_cast<const uint8_t*>(d.data.data()), d.data.size(), c, &img);
    if (!why.empty()) return why + "; re-encode or remove the image";
    if (fixed_size_ && (img.height != info_.height || img.width != info_.width))
      return strprintf("the image is %dx%d (HxW) but the first record's is %dx%d; %s", img.height, img.width,
                       info_.height, info_.width, kSizeHint);
  } else {
    DatumHeader h;
    h.channels = d.channels, h.height = d.height, h.width = d.width;
    h.data_bytes = d.data.size(), h.float_count = d.float_data.size();
    std::string why = check_raw_datum(h);
    if (!why.empty()) return why;
    if (d.channels != c) return strprintf("record has %d channels, the dataset %d", d.channels, c);
    if (fixed_size_ && (d.height != info_.height || d.width != info_.width))
      return strprintf("record is %dx%d (HxW) but the dataset is %dx%d; %s", d.height, d.width, info_.height,
                       info_.width, kSizeHint);
    const uint8_t* chw = reinterpret_cast<const uint8_t*>(d.data.data());
    if (d.data.empty()) {
      planar.resize(d.float_data.size());
      if (!float_datum_to_u8(d.float_data.data(), d.float_data.size(), planar.data()))
        return "float_data holds values that are not integers in 0..255; cnntrain reads 8-bit images, so "
               "rescale them to 0..255 when converting";
      chw = planar.data();
    }
    const ResizeMode m = opt_.transform.mode;
    if (d.height == info_.height && d.width == info_.width && (m == ResizeMode::kNone || m == ResizeMode::kResize)) {
      datum_chw_to_hwc(chw, c, d.height, d.width, out);
      return "";
    }
    img.height = d.height, img.width = d.width, img.channels = c;
    img.pixels.resize(static_cast<size_t>(c) * d.height * d.width);
    datum_chw_to_hwc(chw, c, d.height, d.width, img.pixels.data());
  }
  apply_transform(opt_.transform, img, epoch_.load(std::memory_order_relaxed), id, out);
  return "";
}

void LmdbDataset::read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) {
  const size_t threads = any_encoded_ ? std::min<size_t>(std::max(opt_.read_threads, 1), k / 2) : 1;
  if (threads <= 1) return read_range(ids, k, images, labels);
  // Contiguous shares, one transaction each; the first error (in id order of the shares) is rethrown.
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  const size_t bytes = info_.sample_bytes();
  for (size_t t = 0; t < threads; ++t) {
    const size_t b = k * t / threads, e = k * (t + 1) / threads;
    pool.emplace_back([&, t, b, e] {
      try {
        read_range(ids + b, e - b, images + b * bytes, labels + b);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
}

void LmdbDataset::read_range(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) {
  const size_t bytes = info_.sample_bytes();
  LmdbReadEnv::Txn txn(*env_);
  for (size_t i = 0; i < k; ++i) {
    if (ids[i] < 0 || ids[i] >= info_.count)
      raise(kExitData, "LMDB %s: sample id %lld is outside [0, %lld)", path_.c_str(),
            static_cast<long long>(ids[i]), static_cast<long long>(info_.count));
    int64_t id = ids[i];
    for (int attempt = 0;; ++attempt) {
      const std::string k = key(id);
      const uint8_t* val;
      size_t len;
      std::string why = txn.get(k.data(), k.size(), &val, &len)
                            ? decode_record(id, val, len, images + i * bytes)
                            : "the key vanished from the database (was it rewritten while open?)";
      if (why.empty()) break;
      if (!skip_bad_)
        raise(kExitData, "LMDB %s: sample %lld (key '%s'): %s; fix or remove the record, or set "
              "--data.on_bad_sample skip", path_.c_str(), static_cast<long long>(id), printable(k).c_str(),
              why.c_str());
      if (skipped_read_.fetch_add(1) < kMaxLoggedSkips && is_log_rank())
        std::fprintf(stderr, "cnntrain: warning: LMDB %s: sample %lld (key '%s'): %s; using the next record\n",
                     path_.c_str(), static_cast<long long>(id), printable(k).c_str(), why.c_str());
      if (attempt + 1 >= kMaxConsecutiveBad)
        raise(kExitData, "LMDB %s: %d consecutive bad records from sample %lld on; the database looks "
              "corrupt, rebuild it", path_.c_str(), kMaxConsecutiveBad, static_cast<long long>(ids[i]));
      id = (id + 1) % info_.count;
    }
    labels[i] = labels_[id];
  }
}

std::unique_ptr<Dataset> open_lmdb_dataset(const std::string& path, const LmdbOptions& options) {
  return std::unique_ptr<Dataset>(new LmdbDataset(path, options));
}

}  // namespace cnn
