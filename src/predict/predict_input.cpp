#include "src/predict/predict_input.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "io/hdf5_dataset.h"
#include "io/image_codec.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_env.h"
#include "io/resize.h"
#include "io/resized_dataset.h"
#include "src/base/error.h"

namespace fs = std::filesystem;

namespace cnn {

namespace {

bool is_image_file(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

bool is_dataset(const std::string& path) {
  std::error_code ec;
  return looks_like_lmdb(path) || (fs::is_regular_file(path, ec) && !is_image_file(path));
}

std::unique_ptr<Dataset> open_any(const std::string& path, const LmdbOptions& lo) {
  if (looks_like_lmdb(path)) return open_lmdb_dataset(path, lo);
  return open_hdf5_dataset(path);
}

class DatasetInput : public PredictInput {
 public:
  DatasetInput(const std::string& path, int h, int w, int c, int test_resize) {
    ds_ = open_any(path, LmdbOptions());
    if (looks_like_lmdb(path) && (ds_->info().height != h || ds_->info().width != w)) {
      // Records of another size: decoded to the input size as training's LMDB test set is (src/train/setup.cpp).
      LmdbOptions lo;
      lo.transform.mode = ResizeMode::kCenterCrop;
      lo.transform.height = h, lo.transform.width = w;
      if (test_resize > 0) lo.transform.crop_fraction = std::min(h, w) / float(test_resize);
      ds_ = open_any(path, lo);
    }
    const DatasetInfo& i = ds_->info();
    if (i.channels != c)
      raise(kExitData, "predict: '%s' has %d-channel images, the model takes %d channels", path.c_str(), i.channels,
            c);
    if (i.height != h || i.width != w) {
      ResizeOptions o;
      o.height = h, o.width = w, o.test_resize = test_resize;
      ds_ = std::make_unique<ResizedDataset>(std::move(ds_), o);
    }
  }
  int64_t count() const override { return ds_->info().count; }
  const DatasetInfo* dataset() const override { return &ds_->info(); }
  void read(int64_t first, int n, uint8_t* pixels, int32_t* labels) override {
    std::vector<int64_t> ids(n);
    for (int j = 0; j < n; ++j) ids[j] = first + j;
    ds_->read(ids.data(), ids.size(), pixels, labels);
  }
  std::string name(int64_t i) const override { return std::to_string(i); }

 private:
  std::unique_ptr<Dataset> ds_;
};

class ImageInput : public PredictInput {
 public:
  ImageInput(const std::string& path, int h, int w, int c, int test_resize) : h_(h), w_(w), c_(c) {
    opt_.height = h, opt_.width = w, opt_.test_resize = test_resize;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(path))
        if (e.is_regular_file() && is_image_file(e.path())) files_.push_back(e.path().string());
      std::sort(files_.begin(), files_.end());
      if (files_.empty()) raise(kExitData, "predict: folder '%s' holds no *.jpg, *.jpeg or *.png images", path.c_str());
    } else {
      files_.push_back(path);
    }
  }
  int64_t count() const override { return static_cast<int64_t>(files_.size()); }
  const DatasetInfo* dataset() const override { return nullptr; }
  void read(int64_t first, int n, uint8_t* pixels, int32_t* labels) override {
    for (int j = 0; j < n; ++j) {
      const std::string& f = files_[first + j];
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) raise(kExitData, "predict: cannot read image '%s'", f.c_str());
      Image img;
      const std::string why = decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), c_, &img);
      if (!why.empty()) raise(kExitData, "predict: image '%s': %s", f.c_str(), why.c_str());
      uint8_t* dst = pixels + static_cast<size_t>(j) * h_ * w_ * c_;
      if (img.height == h_ && img.width == w_) {
        // As a dataset stored at the input size is read: unresized (src/train/setup.cpp, fit_hdf5).
        std::copy(img.pixels.begin(), img.pixels.end(), dst);
      } else {
        const ResizePlan p = resize_center_crop(opt_, img.height, img.width);
        resize_antialiased(img.pixels.data(), img.height, img.width, c_, p, dst, h_, w_);
      }
      labels[j] = -1;
    }
  }
  std::string name(int64_t i) const override { return files_[i]; }

 private:
  int h_, w_, c_;
  ResizeOptions opt_;
  std::vector<std::string> files_;
};

}  // namespace

bool peek_dataset_info(const std::string& path, DatasetInfo& info) {
  if (!is_dataset(path)) return false;
  info = open_any(path, LmdbOptions())->info();
  return true;
}

std::unique_ptr<PredictInput> open_predict_input(const std::string& path, int h, int w, int c, int test_resize) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    raise(kExitData, "predict: input '%s' does not exist; give an HDF5 or LMDB dataset, an image file or a folder "
          "of images", path.c_str());
  if (is_dataset(path)) return std::make_unique<DatasetInput>(path, h, w, c, test_resize);
  return std::make_unique<ImageInput>(path, h, w, c, test_resize);
}

}  // namespace cnn
