#include "io/hdf5_dataset.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <unordered_map>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>

#include "io/h5_util.h"
#include "src/base/error.h"

namespace cnn {

namespace {

const char* kFix = "rewrite it with `cnntrain-data` or h5py following the schema in docs/data.md";

class Hdf5Dataset : public Dataset {
 public:
  Hdf5Dataset(const std::string& path, const Hdf5ReadOptions& opt) : path_(path) {
    std::lock_guard<std::mutex> lk(h5_mutex());
    h5_quiet();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      raise(kExitData, "data file '%s' does not exist; check --data.train/--data.test (run `make data` for "
            "Fashion-MNIST)", path.c_str());
    if (S_ISDIR(st.st_mode)) raise(kExitData, "data file '%s' is a directory, not an HDF5 file", path.c_str());
    if (::access(path.c_str(), R_OK) != 0)
      raise(kExitData, "data file '%s' is not readable (permissions)", path.c_str());
    htri_t is_h5 = H5Fis_hdf5(path.c_str());
    if (is_h5 <= 0)
      raise(kExitData, "data file '%s' is not an HDF5 file (%s); %s", path.c_str(),
            h5_last_error().empty() ? "no HDF5 signature" : h5_last_error().c_str(), kFix);
    file_ = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file_.valid())
      raise(kExitData, "cannot open HDF5 file '%s': %s (a truncated or damaged file; copy or convert it again)",
            path.c_str(), h5_last_error().c_str());
    open_images(opt);
    read_labels();
    read_attributes();
  }

  const DatasetInfo& info() const override { return info_; }
  const std::string& path() const override { return path_; }
  int32_t label(int64_t id) const override { return labels_[check_id(id)]; }

  void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) override {
    std::lock_guard<std::mutex> lk(h5_mutex());
    read_locked(ids, k, images, labels);
  }

 private:
  // Callers hold h5_mutex(). Samples are served from whole blocks of rows (the file's chunks) kept in an LRU
  // cache: HDF5 reads a whole chunk for any sample in it anyway, and a selection of many scattered rows costs
  // HDF5 tens of microseconds per row, while one chunk read plus memcpys costs a fraction of that.
  void read_locked(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) {
    const size_t sb = info_.sample_bytes();
    for (size_t i = 0; i < k; ++i) {
      const int64_t id = check_id(ids[i]);
      const uint8_t* block = cached_block(id / block_rows_);
      std::copy_n(block + (id % block_rows_) * sb, sb, images + i * sb);
      if (labels) labels[i] = labels_[id];
    }
  }

  const uint8_t* cached_block(int64_t b) {
    auto it = cache_.find(b);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);  // most recently used first
      return it->second.first.data();
    }
    const int64_t first = b * block_rows_, rows = std::min<int64_t>(block_rows_, info_.count - first);
    const size_t bytes = static_cast<size_t>(rows) * info_.sample_bytes();
    while (!lru_.empty() && cached_bytes_ + bytes > cache_bytes_) {
      auto victim = cache_.find(lru_.back());
      cached_bytes_ -= victim->second.first.size();
      cache_.erase(victim);
      lru_.pop_back();
    }
    std::vector<uint8_t> data(bytes);
    H5Handle fspace = h5_space(H5Dget_space(images_.get()));
    hsize_t start[4] = {static_cast<hsize_t>(first), 0, 0, 0};
    hsize_t count[4] = {static_cast<hsize_t>(rows), (hsize_t)info_.height, (hsize_t)info_.width,
                        (hsize_t)info_.channels};
    const int rank = H5Sget_simple_extent_ndims(fspace.get());
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    // A memory space of the selection's own shape keeps HDF5 on its fast path (a flat one makes it iterate
    // element by element: milliseconds per 224x224x3 image).
    H5Handle mspace = h5_space(H5Screate_simple(rank, count, nullptr));
    if (rank < 3 || H5Dread(images_.get(), H5T_NATIVE_UINT8, mspace.get(), fspace.get(), H5P_DEFAULT, data.data()) < 0)
      raise(kExitData, "reading /images of '%s' failed for samples %lld..%lld: %s (damaged file? %s)",
            path_.c_str(), (long long)first, (long long)(first + rows - 1), h5_last_error().c_str(), kFix);
    lru_.push_front(b);
    cached_bytes_ += bytes;
    auto& slot = cache_[b];
    slot.first = std::move(data);
    slot.second = lru_.begin();
    return slot.first.data();
  }

  int64_t check_id(int64_t id) const {
    if (id < 0 || id >= info_.count)
      raise(kExitData, "sample index %lld is out of range for '%s' (%lld samples)", (long long)id, path_.c_str(),
            (long long)info_.count);
    return id;
  }

  H5Handle open_dataset_checked(const char* name, hid_t dapl) {
    if (H5Lexists(file_.get(), name, H5P_DEFAULT) <= 0)
      raise(kExitData, "data file '%s' has no dataset '%s'; %s", path_.c_str(), name, kFix);
    H5Handle d = h5_dataset(H5Dopen2(file_.get(), name, dapl));
    if (!d.valid())
      raise(kExitData, "cannot open dataset '%s' in '%s': %s", name, path_.c_str(), h5_last_error().c_str());
    return d;
  }

  void open_images(const Hdf5ReadOptions& opt) {
    // Our block cache replaces HDF5's chunk cache (which would hold a second copy).
    H5Handle dapl = h5_plist(H5Pcreate(H5P_DATASET_ACCESS));
    H5Pset_chunk_cache(dapl.get(), 0, 0, 1.0);
    images_ = open_dataset_checked("/images", dapl.get());
    cache_bytes_ = opt.chunk_cache_mb << 20;
    H5Handle t = h5_type(H5Dget_type(images_.get()));
    if (H5Tget_class(t.get()) != H5T_INTEGER || H5Tget_size(t.get()) != 1 || H5Tget_sign(t.get()) != H5T_SGN_NONE)
      raise(kExitData, "dataset '/images' in '%s' must be uint8 (0..255 pixel values), found %s of %zu byte(s); %s",
            path_.c_str(), H5Tget_class(t.get()) == H5T_FLOAT ? "float" : "another type", H5Tget_size(t.get()),
            kFix);
    H5Handle sp = h5_space(H5Dget_space(images_.get()));
    int rank = H5Sget_simple_extent_ndims(sp.get());
    if (rank != 3 && rank != 4)
      raise(kExitData, "dataset '/images' in '%s' has rank %d; expected 4 ([N,H,W,C], NHWC) or 3 ([N,H,W]); %s",
            path_.c_str(), rank, kFix);
    hsize_t dims[4] = {0, 0, 0, 1};
    H5Sget_simple_extent_dims(sp.get(), dims, nullptr);
    info_.count = static_cast<int64_t>(dims[0]);
    info_.height = static_cast<int>(dims[1]);
    info_.width = static_cast<int>(dims[2]);
    info_.channels = static_cast<int>(dims[3]);
    if (info_.count == 0) raise(kExitData, "dataset '/images' in '%s' is empty", path_.c_str());
    if (info_.height == 0 || info_.width == 0 || info_.channels == 0 || info_.channels > 4096)
      raise(kExitData, "dataset '/images' in '%s' has a bad image shape %dx%dx%d", path_.c_str(), info_.height,
            info_.width, info_.channels);
    // Cache blocks follow the file's chunks along N; contiguous datasets get ~64 KiB blocks.
    H5Handle dcpl = h5_plist(H5Dget_create_plist(images_.get()));
    hsize_t chunk[4] = {0, 0, 0, 0};
    if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED && H5Pget_chunk(dcpl.get(), rank, chunk) >= 1 && chunk[0] > 0)
      block_rows_ = static_cast<int64_t>(chunk[0]);
    else
      block_rows_ = std::max<int64_t>(1, (64 << 10) / static_cast<int64_t>(info_.sample_bytes()));
  }

  void read_labels() {
    H5Handle d = open_dataset_checked("/labels", H5P_DEFAULT);
    H5Handle t = h5_type(H5Dget_type(d.get()));
    if (H5Tget_class(t.get()) != H5T_INTEGER)
      raise(kExitData, "dataset '/labels' in '%s' must hold integers (int32 class ids), found %s; %s",
            path_.c_str(), H5Tget_class(t.get()) == H5T_FLOAT ? "floats" : "another type", kFix);
    H5Handle sp = h5_space(H5Dget_space(d.get()));
    int rank = H5Sget_simple_extent_ndims(sp.get());
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(sp.get(), dims, nullptr);
    if (rank != 1 && !(rank == 2 && dims[1] == 1))
      raise(kExitData, "dataset '/labels' in '%s' has rank %d; expected 1 ([N]); %s", path_.c_str(), rank, kFix);
    if (static_cast<int64_t>(dims[0]) != info_.count)
      raise(kExitData, "'%s' has %lld images but %lld labels; every image needs exactly one label; %s",
            path_.c_str(), (long long)info_.count, (long long)dims[0], kFix);
    labels_.resize(info_.count);
    if (H5Dread(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels_.data()) < 0)
      raise(kExitData, "reading '/labels' of '%s' failed: %s", path_.c_str(), h5_last_error().c_str());
  }

  void read_attributes() {
    std::vector<long long> nc;
    int32_t max_label = *std::max_element(labels_.begin(), labels_.end());
    if (h5_read_attr_ints(file_.get(), "num_classes", nc) && nc.size() == 1) {
      if (nc[0] < 1 || nc[0] > (1 << 24))
        raise(kExitData, "attribute num_classes of '%s' is %lld; it must be positive", path_.c_str(), nc[0]);
      info_.num_classes = static_cast<int>(nc[0]);
    } else {
      info_.num_classes = max_label + 1;
    }
    for (int64_t i = 0; i < info_.count; ++i) {
      if (labels_[i] < 0 || labels_[i] >= info_.num_classes)
        raise(kExitData, "'%s': label %d of sample %lld is outside [0, %d) (num_classes=%d); fix the label or the "
              "num_classes attribute", path_.c_str(), labels_[i], (long long)i, info_.num_classes,
              info_.num_classes);
    }
    std::vector<double> mean, sd;
    bool have_mean = h5_read_attr_floats(file_.get(), "mean", mean);
    bool have_std = h5_read_attr_floats(file_.get(), "std", sd);
    if (have_mean && have_std) {
      if (mean.size() != static_cast<size_t>(info_.channels) || sd.size() != mean.size())
        raise(kExitData, "attributes mean/std of '%s' have %zu/%zu values but the images have %d channel(s)",
              path_.c_str(), mean.size(), sd.size(), info_.channels);
      for (size_t c = 0; c < mean.size(); ++c) {
        if (!(sd[c] > 0) || !std::isfinite(mean[c]))
          raise(kExitData, "attribute std[%zu] of '%s' is %g; it must be positive", c, path_.c_str(), sd[c]);
        info_.mean.push_back(static_cast<float>(mean[c]));
        info_.std.push_back(static_cast<float>(sd[c]));
      }
    } else {
      estimate_stats();
    }
    h5_read_attr_strings(file_.get(), "class_names", info_.class_names);
  }

  // Without mean/std attributes: estimate them from up to 4096 evenly spaced samples (deterministic).
  void estimate_stats() {
    int64_t k = std::min<int64_t>(info_.count, 4096);
    std::vector<int64_t> ids(k);
    for (int64_t i = 0; i < k; ++i) ids[i] = i * info_.count / k;
    std::vector<uint8_t> px(k * info_.sample_bytes());
    read_locked(ids.data(), k, px.data(), nullptr);
    compute_channel_stats(px.data(), k, info_.height * info_.width, info_.channels, info_.mean, info_.std);
  }

  std::string path_;
  DatasetInfo info_;
  H5Handle file_, images_;
  std::vector<int32_t> labels_;
  int64_t block_rows_ = 1;
  size_t cache_bytes_ = 0, cached_bytes_ = 0;
  std::list<int64_t> lru_;
  std::unordered_map<int64_t, std::pair<std::vector<uint8_t>, std::list<int64_t>::iterator>> cache_;
};

}  // namespace

std::unique_ptr<Dataset> open_hdf5_dataset(const std::string& path, const Hdf5ReadOptions& opt) {
  return std::make_unique<Hdf5Dataset>(path, opt);
}

void compute_channel_stats(const uint8_t* images, int64_t count, int hw, int channels, std::vector<float>& mean,
                           std::vector<float>& sd) {
  std::vector<double> s(channels, 0.0), s2(channels, 0.0);
  const int64_t pixels = count * hw;
  for (int64_t p = 0; p < pixels; ++p)
    for (int c = 0; c < channels; ++c) {
      double v = images[p * channels + c];
      s[c] += v;
      s2[c] += v * v;
    }
  mean.assign(channels, 0.f);
  sd.assign(channels, 1.f);
  for (int c = 0; c < channels; ++c) {
    double m = s[c] / pixels;
    double var = s2[c] / pixels - m * m;
    mean[c] = static_cast<float>(m);
    sd[c] = static_cast<float>(var > 1e-6 ? std::sqrt(var) : 1.0);
  }
}

void write_hdf5_dataset(const std::string& path, const DatasetInfo& info, const uint8_t* images,
                        const int32_t* labels) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  const std::string tmp = path + ".tmp";
  H5Handle f = h5_file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.valid())
    raise(kExitData, "cannot create '%s': %s (does the directory exist and is it writable?)", tmp.c_str(),
          h5_last_error().c_str());
  const hsize_t sb = info.sample_bytes();
  // About 64 KiB per chunk: big enough for sequential throughput, small enough that random access by sample
  // reads little that the rank does not need.
  hsize_t rows = std::max<hsize_t>(1, std::min<hsize_t>(info.count, (64u << 10) / std::max<hsize_t>(sb, 1)));
  hsize_t dims[4] = {(hsize_t)info.count, (hsize_t)info.height, (hsize_t)info.width, (hsize_t)info.channels};
  hsize_t chunk[4] = {rows, dims[1], dims[2], dims[3]};
  H5Handle dcpl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl.get(), 4, chunk);
  H5Handle sp = h5_space(H5Screate_simple(4, dims, nullptr));
  H5Handle d = h5_dataset(H5Dcreate2(f.get(), "/images", H5T_STD_U8LE, sp.get(), H5P_DEFAULT, dcpl.get(),
                                     H5P_DEFAULT));
  if (!d.valid() || H5Dwrite(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, images) < 0)
    raise(kExitData, "writing /images to '%s' failed: %s", tmp.c_str(), h5_last_error().c_str());
  hsize_t ldims[1] = {(hsize_t)info.count};
  H5Handle lsp = h5_space(H5Screate_simple(1, ldims, nullptr));
  H5Handle l = h5_dataset(H5Dcreate2(f.get(), "/labels", H5T_STD_I32LE, lsp.get(), H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT));
  if (!l.valid() || H5Dwrite(l.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) < 0)
    raise(kExitData, "writing /labels to '%s' failed: %s", tmp.c_str(), h5_last_error().c_str());
  h5_write_attr_ints(f.get(), "num_classes", {info.num_classes});
  h5_write_attr_floats(f.get(), "mean", std::vector<double>(info.mean.begin(), info.mean.end()));
  h5_write_attr_floats(f.get(), "std", std::vector<double>(info.std.begin(), info.std.end()));
  if (!info.class_names.empty()) h5_write_attr_strings(f.get(), "class_names", info.class_names);
  d.reset();
  l.reset();
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0)
    raise(kExitData, "flushing '%s' failed: %s (disk full?)", tmp.c_str(), h5_last_error().c_str());
  f.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    raise(kExitData, "cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(errno));
}

}  // namespace cnn
