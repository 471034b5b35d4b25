// IDX -> HDF5 conversion round trip, the HDF5 reader's checks of bad files, and the prefetching loader.
#include <hdf5.h>
#include <zlib.h>

#include <fstream>
#include <numeric>

#include "io/convert_idx.h"
#include "io/hdf5_dataset.h"
#include "io/h5_util.h"
#include "io/loader.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

void write_idx(const std::string& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  uint8_t magic[4] = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  gzwrite(f, magic, 4);
  for (uint32_t d : dims) {
    uint8_t b[4] = {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)};
    gzwrite(f, b, 4);
  }
  gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  gzclose(f);
}

// A small synthetic dataset: 37 images 5x4, labels i % 3, pixel values derived from the index.
struct Fixture {
  test::TempDir dir;
  std::vector<uint8_t> px;
  std::vector<uint8_t> lab;
  std::string h5;
  Fixture() {
    for (int i = 0; i < 37; ++i) {
      lab.push_back(static_cast<uint8_t>(i % 3));
      for (int p = 0; p < 20; ++p) px.push_back(static_cast<uint8_t>((i * 7 + p * 13) % 256));
    }
    write_idx(dir.file("img.gz"), {37, 5, 4}, px);
    write_idx(dir.file("lab.gz"), {37}, lab);
    IdxConvertOptions o;
    o.images = dir.file("img.gz");
    o.labels = dir.file("lab.gz");
    o.out = h5 = dir.file("d.h5");
    o.class_names = {"a", "b", "c"};
    convert_idx_to_hdf5(o);
  }
};

TEST(Convert, IdxToHdf5RoundTrip) {
  Fixture fx;
  auto ds = open_hdf5_dataset(fx.h5);
  const DatasetInfo& i = ds->info();
  EXPECT_EQ(i.count, 37);
  EXPECT_EQ(i.height, 5);
  EXPECT_EQ(i.width, 4);
  EXPECT_EQ(i.channels, 1);
  EXPECT_EQ(i.num_classes, 3);
  EXPECT_EQ(i.class_names, (std::vector<std::string>{"a", "b", "c"}));
  double mean = std::accumulate(fx.px.begin(), fx.px.end(), 0.0) / fx.px.size();
  EXPECT_NEAR(i.mean[0], mean, 1e-3);
  // Any order, repeats, gaps: every sample comes back byte-identical with its label.
  std::vector<int64_t> ids = {36, 0, 5, 5, 17, 1, 2, 3};
  std::vector<uint8_t> img(ids.size() * 20);
  std::vector<int32_t> labels(ids.size());
  ds->read(ids.data(), ids.size(), img.data(), labels.data());
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(labels[k], fx.lab[ids[k]]);
    EXPECT_TRUE(std::equal(img.begin() + k * 20, img.begin() + (k + 1) * 20, fx.px.begin() + ids[k] * 20))
        << "sample " << ids[k];
  }
  int64_t bad = 37;
  test::expect_throws([&] { ds->read(&bad, 1, img.data(), labels.data()); }, kExitData, "sample index 37");
}

TEST(Convert, MismatchedIdxCountsFail) {
  test::TempDir dir;
  write_idx(dir.file("i.gz"), {2, 2, 2}, std::vector<uint8_t>(8, 1));
  write_idx(dir.file("l.gz"), {3}, {0, 1, 2});
  IdxConvertOptions o;
  o.images = dir.file("i.gz");
  o.labels = dir.file("l.gz");
  o.out = dir.file("o.h5");
  try {
    convert_idx_to_hdf5(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("2 images but"), std::string::npos) << e.what();
  }
}

// Writes an HDF5 file with the given /images and /labels (either may be skipped) for the failure cases.
void write_h5(const std::string& path, hid_t img_type, std::vector<hsize_t> img_dims, bool labels, hid_t lab_type,
              hsize_t nlab, long long num_classes = 3) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (!img_dims.empty()) {
    hsize_t n = 1;
    for (auto d : img_dims) n *= d;
    std::vector<double> v(n, 3.0);
    hid_t sp = H5Screate_simple(static_cast<int>(img_dims.size()), img_dims.data(), nullptr);
    hid_t d = H5Dcreate2(f, "/images", img_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
    H5Sclose(sp);
  }
  if (labels) {
    std::vector<double> v(nlab);
    for (hsize_t i = 0; i < nlab; ++i) v[i] = static_cast<double>(i % 5);
    hid_t sp = H5Screate_simple(1, &nlab, nullptr);
    hid_t d = H5Dcreate2(f, "/labels", lab_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
    H5Sclose(sp);
  }
  h5_write_attr_ints(f, "num_classes", {num_classes});
  H5Fclose(f);
}

void expect_open_error(const std::string& path, const std::string& needle) {
  try {
    open_hdf5_dataset(path);
    ADD_FAILURE() << "opening " << path << " succeeded; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "message must name the file: " << e.what();
  }
}

TEST(Hdf5Reader, BadFiles) {
  test::TempDir dir;
  expect_open_error(dir.file("missing.h5"), "does not exist");
  std::ofstream(dir.file("text.h5")) << "this is not hdf5\n";
  expect_open_error(dir.file("text.h5"), "not an HDF5 file");
  write_h5(dir.file("noimg.h5"), 0, {}, true, H5T_STD_I32LE, 4);
  expect_open_error(dir.file("noimg.h5"), "no dataset '/images'");
  write_h5(dir.file("nolab.h5"), H5T_STD_U8LE, {4, 2, 2, 1}, false, 0, 0);
  expect_open_error(dir.file("nolab.h5"), "no dataset '/labels'");
  write_h5(dir.file("float.h5"), H5T_IEEE_F32LE, {4, 2, 2, 1}, true, H5T_STD_I32LE, 4);
  expect_open_error(dir.file("float.h5"), "must be uint8");
  write_h5(dir.file("rank2.h5"), H5T_STD_U8LE, {4, 4}, true, H5T_STD_I32LE, 4);
  expect_open_error(dir.file("rank2.h5"), "has rank 2");
  write_h5(dir.file("flab.h5"), H5T_STD_U8LE, {4, 2, 2, 1}, true, H5T_IEEE_F32LE, 4);
  expect_open_error(dir.file("flab.h5"), "must hold integers");
  write_h5(dir.file("count.h5"), H5T_STD_U8LE, {4, 2, 2, 1}, true, H5T_STD_I32LE, 3);
  expect_open_error(dir.file("count.h5"), "4 images but 3 labels");
  // labels are i % 5 = 0..4 but num_classes = 3: sample 3 has label 3.
  write_h5(dir.file("label.h5"), H5T_STD_U8LE, {5, 2, 2, 1}, true, H5T_STD_I32LE, 5, 3);
  expect_open_error(dir.file("label.h5"), "label 3 of sample 3");
}

TEST(Hdf5Reader, TruncatedFileFails) {
  Fixture fx;
  std::ifstream in(fx.h5, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = fx.dir.file("cut.h5");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  try {
    auto ds = open_hdf5_dataset(cut);
    // If the metadata survived the cut, reading the images must fail instead.
    std::vector<int64_t> ids(37);
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<uint8_t> img(37 * 20);
    std::vector<int32_t> lab(37);
    ds->read(ids.data(), ids.size(), img.data(), lab.data());
    FAIL() << "a truncated file was read without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
  }
}

TEST(Loader, BatchesMatchDirectReads) {
  Fixture fx;
  auto ds = open_hdf5_dataset(fx.h5);
  Sampler s(37, 6, 9);  // 6 steps per epoch, 1 dropped sample
  Loader loader(*ds, s, 1, 2, 2, 0, 4, 5);  // rank 1 of 2, from epoch 0 step 4, 5 batches (crosses an epoch)
  const int64_t want[5][2] = {{0, 4}, {0, 5}, {1, 0}, {1, 1}, {1, 2}};
  const DatasetInfo& info = ds->info();
  for (auto& w : want) {
    double wait = -1;
    const Batch& b = loader.next(&wait);
    EXPECT_GE(wait, 0.0);
    EXPECT_EQ(b.epoch, w[0]);
    EXPECT_EQ(b.step, w[1]);
    auto ids = s.rank_slice(w[0], w[1], 1, 2);
    ASSERT_EQ(b.ids, ids);
    ASSERT_EQ(b.n, 3);
    for (int k = 0; k < b.n; ++k) {
      EXPECT_EQ(b.labels[k], fx.lab[ids[k]]);
      for (int p = 0; p < 20; ++p)
        EXPECT_NEAR(b.images[k * 20 + p], (fx.px[ids[k] * 20 + p] - info.mean[0]) / info.std[0], 1e-5);
    }
  }
}

TEST(Loader, ErrorsReachTheTrainer) {
  Fixture fx;
  auto ds = open_hdf5_dataset(fx.h5);
  Sampler s(40, 8, 1);  // claims 40 samples: ids 37..39 do not exist in the file
  Loader loader(*ds, s, 0, 1, 2, 0, 0, 5);
  try {
    for (int i = 0; i < 5; ++i) loader.next(nullptr);
    FAIL() << "no error for samples beyond the file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cnn
