// Converters around LMDB: IDX -> LMDB (same content and statistics as IDX -> HDF5), HDF5 <-> LMDB round trip,
// image folders -> LMDB (encoded and raw) and HDF5, inspect, and format detection in open_dataset.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "io/convert_idx.h"
#include "io/convert_lmdb.h"
#include "io/hdf5_dataset.h"
#include "io/image_codec.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_env.h"
#include "src/base/error.h"

namespace cnn {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cnntrain_lmdb_conv_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string sub(const std::string& name) const { return path + "/" + name; }
};

void put_be32(std::ofstream& f, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  f.write(b, 4);
}

// A plain (not gzipped) IDX pair: n images of rows x cols, labels i % 3.
void write_idx(const std::string& images, const std::string& labels, int n, int rows, int cols) {
  std::ofstream im(images, std::ios::binary), lb(labels, std::ios::binary);
  put_be32(im, 0x803), put_be32(im, n), put_be32(im, rows), put_be32(im, cols);
  for (int i = 0; i < n * rows * cols; ++i) im.put(static_cast<char>((i * 37 + i / 7) % 256));
  put_be32(lb, 0x801), put_be32(lb, n);
  for (int i = 0; i < n; ++i) lb.put(static_cast<char>(i % 3));
}

// write_idx's pair as img.idx and lab.idx in tmp, and the options that convert it to tmp/db.
IdxConvertOptions idx_pair(const TempDir& tmp, int n, int rows, int cols) {
  write_idx(tmp.sub("img.idx"), tmp.sub("lab.idx"), n, rows, cols);
  IdxConvertOptions o;
  o.images = tmp.sub("img.idx");
  o.labels = tmp.sub("lab.idx");
  o.out = tmp.sub("db");
  return o;
}

std::vector<uint8_t> read_all(Dataset& ds, std::vector<int32_t>* labels) {
  std::vector<int64_t> ids(ds.info().count);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<uint8_t> img(ids.size() * ds.info().sample_bytes());
  labels->resize(ids.size());
  ds.read(ids.data(), ids.size(), img.data(), labels->data());
  return img;
}

TEST(LmdbConvert, IdxToLmdbMatchesIdxToHdf5) {
  TempDir tmp;
  IdxConvertOptions o = idx_pair(tmp, 50, 6, 5);
  o.class_names = {"a", "b b", "c/d"};
  o.out = tmp.sub("train.h5");
  convert_idx_to_hdf5(o);
  o.out = tmp.sub("train_lmdb");
  DatasetInfo info = convert_idx_to_lmdb(o);
  EXPECT_EQ(info.count, 50);
  auto h5 = open_dataset(tmp.sub("train.h5"), "auto");
  auto db = open_dataset(tmp.sub("train_lmdb"), "auto");
  ASSERT_NE(dynamic_cast<LmdbDataset*>(db.get()), nullptr) << "auto-detected as LMDB";
  EXPECT_EQ(dynamic_cast<LmdbDataset*>(db.get())->key(7), "00000007") << "convert_mnist_data's keys";
  EXPECT_EQ(db->info().num_classes, 3);
  EXPECT_EQ(db->info().class_names, o.class_names);
  ASSERT_EQ(db->info().mean.size(), 1u);
  EXPECT_FLOAT_EQ(db->info().mean[0], h5->info().mean[0]);
  EXPECT_FLOAT_EQ(db->info().std[0], h5->info().std[0]);
  std::vector<int32_t> la, lb;
  EXPECT_EQ(read_all(*db, &la), read_all(*h5, &lb));
  EXPECT_EQ(la, lb);

  // Test split: statistics from the training LMDB.
  o.stats_from = tmp.sub("train_lmdb");
  o.out = tmp.sub("test_lmdb");
  DatasetInfo t = convert_idx_to_lmdb(o);
  EXPECT_EQ(t.mean, db->info().mean);
}

TEST(LmdbConvert, Hdf5LmdbHdf5RoundTrip) {
  TempDir tmp;
  DatasetInfo info;
  info.count = 33, info.height = 4, info.width = 3, info.channels = 3, info.num_classes = 5;
  info.mean = {10, 20, 30};
  info.std = {1, 2, 3};
  info.class_names = {"v", "w", "x", "y", "z"};
  std::vector<uint8_t> img(info.count * info.sample_bytes());
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i * 11);
  std::vector<int32_t> labels(info.count);
  for (int i = 0; i < info.count; ++i) labels[i] = (i * 3) % 5;
  write_hdf5_dataset(tmp.sub("a.h5"), info, img.data(), labels.data());
  convert_hdf5_to_lmdb(tmp.sub("a.h5"), tmp.sub("db"));
  convert_lmdb_to_hdf5(tmp.sub("db"), tmp.sub("b.h5"));
  auto b = open_dataset(tmp.sub("b.h5"), "hdf5");
  EXPECT_EQ(b->info().count, info.count);
  EXPECT_EQ(b->info().mean, info.mean);
  EXPECT_EQ(b->info().std, info.std);
  EXPECT_EQ(b->info().class_names, info.class_names);
  std::vector<int32_t> lb;
  EXPECT_EQ(read_all(*b, &lb), img);
  EXPECT_EQ(lb, labels);
  // Existing output is refused unless overwriting.
  EXPECT_THROW(convert_hdf5_to_lmdb(tmp.sub("a.h5"), tmp.sub("db")), Error);
  convert_hdf5_to_lmdb(tmp.sub("a.h5"), tmp.sub("db"), true);
}

void write_folder(const std::string& root) {
  // Classes out of order on disk; sizes differ per image.
  for (const char* c : {"zebra", "ant", "moth"}) fs::create_directories(root + "/" + c);
  auto save = [&](const std::string& rel, int h, int w, bool png) {
    std::vector<uint8_t> px(h * w * 3);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i % 97 + rel.size());
    std::string f = png ? encode_png(px.data(), h, w, 3) : encode_jpeg(px.data(), h, w, 3);
    std::ofstream(root + "/" + rel, std::ios::binary) << f;
  };
  save("ant/b.png", 10, 12, true);
  save("ant/a.JPG", 14, 9, false);
  save("moth/x.jpeg", 8, 8, false);
  save("zebra/z.png", 20, 16, true);
  std::ofstream(root + "/zebra/notes.txt") << "not an image";
}

TEST(LmdbConvert, ImageFolderToEncodedLmdbRawLmdbAndHdf5) {
  TempDir tmp;
  write_folder(tmp.sub("imgs"));
  ImageFolderOptions opt;
  ImageFolderResult r = convert_image_folder(tmp.sub("imgs"), tmp.sub("enc"), opt);
  EXPECT_EQ(r.info.count, 4);
  EXPECT_EQ(r.info.class_names, (std::vector<std::string>{"ant", "moth", "zebra"}));
  LmdbOptions lo;
  lo.transform.height = lo.transform.width = 8;
  lo.transform.mode = ResizeMode::kCenterCrop;
  LmdbDataset enc(tmp.sub("enc"), lo);
  EXPECT_TRUE(enc.has_encoded());
  EXPECT_EQ(enc.key(0), "00000000_ant/a.JPG");
  EXPECT_EQ(enc.key(3), "00000003_zebra/z.png");
  EXPECT_EQ(enc.label(2), 1);
  EXPECT_EQ(enc.info().class_names[2], "zebra");
  EXPECT_EQ(enc.describe(3).substr(0, 20), "PNG 20x16x3 (HxWxC),");
  EXPECT_EQ(enc.describe(0).substr(0, 20), "JPEG 14x9x3 (HxWxC),");

  // Raw records and HDF5 need one size.
  EXPECT_THROW(convert_image_folder(tmp.sub("imgs"), tmp.sub("raw0"), [] {
                 ImageFolderOptions o;
                 o.encoded = false;
                 return o;
               }()), Error);
  opt.encoded = false;
  opt.height = 6, opt.width = 5;
  convert_image_folder(tmp.sub("imgs"), tmp.sub("raw"), opt);
  LmdbDataset raw(tmp.sub("raw"));
  EXPECT_FALSE(raw.has_encoded());
  EXPECT_EQ(raw.info().height, 6);
  EXPECT_EQ(raw.info().width, 5);
  opt.format = "hdf5";
  convert_image_folder(tmp.sub("imgs"), tmp.sub("f.h5"), opt);
  auto h5 = open_dataset(tmp.sub("f.h5"), "auto");
  std::vector<int32_t> la, lb;
  EXPECT_EQ(read_all(raw, &la), read_all(*h5, &lb));
  EXPECT_EQ(la, lb);
  EXPECT_EQ(raw.info().mean, h5->info().mean);

  // An unreadable image: fail names the file, skip counts it.
  std::ofstream(tmp.sub("imgs") + "/moth/broken.png") << "\x89PNG\r\n\x1a\n garbage";
  opt.format = "lmdb";
  opt.overwrite = true;
  try {
    convert_image_folder(tmp.sub("imgs"), tmp.sub("raw"), opt);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moth/broken.png"), std::string::npos) << e.what();
  }
  opt.on_bad_image = "skip";
  EXPECT_EQ(convert_image_folder(tmp.sub("imgs"), tmp.sub("raw"), opt).skipped, 1);
}

TEST(LmdbConvert, InspectShowsCountsHistogramAndFirstRecords) {
  TempDir tmp;
  convert_idx_to_lmdb(idx_pair(tmp, 10, 4, 4));
  const std::string text = inspect_dataset(tmp.sub("db"), "auto", 2);
  for (const char* frag : {"LMDB, 10 samples of 4x4x1", "3 classes", "0: 4", "1: 3", "2: 3", "key '00000001'",
                           "records: raw", "raw 1x4x4 (CxHxW) data"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << " not in:\n" << text;
}

TEST(LmdbConvert, MixedSizesAreInspectedAndNameTheImageSizeOption) {
  TempDir tmp;
  write_folder(tmp.sub("imgs"));  // four sizes
  convert_image_folder(tmp.sub("imgs"), tmp.sub("enc"), ImageFolderOptions());
  const std::string text = inspect_dataset(tmp.sub("enc"), "auto", 4);
  for (const char* frag : {"LMDB, 4 samples of 14x9x3", "image sizes differ between records", "--data.image_size HxW",
                           "key '00000001_ant/b.png' PNG 10x12x3", "not readable as is: the image is 10x12"})
    EXPECT_NE(text.find(frag), std::string::npos) << frag << " not in:\n" << text;
  // Training without a target size fails at open (its statistics pass meets the second size) and says what to do.
  try {
    LmdbDataset ds(tmp.sub("enc"));
    ADD_FAILURE() << "a mixed-size LMDB opened without a target size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--data.image_size"), std::string::npos) << e.what();
  }
}

TEST(LmdbConvert, OpenDatasetFormatChoice) {
  TempDir tmp;
  convert_idx_to_lmdb(idx_pair(tmp, 4, 2, 2));
  EXPECT_EQ(open_dataset(tmp.sub("db") + "/data.mdb", "lmdb")->info().count, 4);
  EXPECT_THROW(open_dataset(tmp.sub("img.idx"), "lmdb"), Error);
}

}  // namespace
}  // namespace cnn
