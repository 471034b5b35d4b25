// LmdbDataset: Caffe-format databases written here byte for byte, raw/float/encoded records, resizing, and
// every bad-input case with the message it must give.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/image_codec.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_datum.h"
#include "io/lmdb_env.h"
#include "io/lmdb_meta.h"
#include "src/base/error.h"

namespace cnn {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cnntrain_lmdb_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string sub(const std::string& name) const { return path + "/" + name; }
};

std::vector<uint8_t> random_image(int h, int w, int c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * c);
  for (auto& v : img) v = static_cast<uint8_t>(rng());
  return img;
}

// Smooth content so JPEG's loss stays small.
std::vector<uint8_t> gradient_image(int h, int w, int c, int shift) {
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) img[(y * w + x) * c + k] = static_cast<uint8_t>((x * 3 + y * 2 + k * 30 + shift) % 256);
  return img;
}

void write_db(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& kv) {
  LmdbWriter w(dir);
  for (const auto& r : kv) w.put(r.first, r.second);
  w.finish();
}

// Expects cnn::Error(kExitData) whose message contains every fragment.
template <class F>
void expect_data_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData) << e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << "'" << frag << "' not in: " << e.what();
  }
}

TEST(LmdbDataset, RawRoundTripKeysInAnyOrderAndRandomAccess) {
  TempDir tmp;
  const int n = 37, h = 5, w = 7, c = 3;
  std::vector<std::vector<uint8_t>> imgs;
  std::vector<std::pair<std::string, std::string>> kv;
  for (int i = 0; i < n; ++i) {
    imgs.push_back(random_image(h, w, c, i));
    // Non-padded keys: LMDB orders them "img_0, img_1, img_10, ..." -- not the write order.
    kv.emplace_back("img_" + std::to_string(i), serialize_datum(make_raw_datum(imgs[i].data(), h, w, c, i % 4)));
  }
  write_db(tmp.sub("db"), kv);
  LmdbOptions opt;
  opt.stats_samples = 0;
  LmdbDataset ds(tmp.sub("db"), opt);
  ASSERT_EQ(ds.info().count, n);
  EXPECT_EQ(ds.info().height, h);
  EXPECT_EQ(ds.info().width, w);
  EXPECT_EQ(ds.info().channels, c);
  EXPECT_EQ(ds.info().num_classes, 4);
  std::vector<int64_t> ids = {36, 0, 5, 5, 17};
  std::vector<uint8_t> out(ids.size() * ds.info().sample_bytes());
  std::vector<int32_t> labels(ids.size());
  ds.read(ids.data(), ids.size(), out.data(), labels.data());
  for (size_t j = 0; j < ids.size(); ++j) {
    const int src = std::stoi(ds.key(ids[j]).substr(4));
    EXPECT_EQ(labels[j], src % 4);
    EXPECT_EQ(labels[j], ds.label(ids[j]));
    EXPECT_EQ(std::vector<uint8_t>(out.begin() + j * imgs[0].size(), out.begin() + (j + 1) * imgs[0].size()),
              imgs[src]) << "id " << ids[j];
  }
  // Also opens by the data file's path.
  LmdbDataset by_file(tmp.sub("db") + "/data.mdb", opt);
  EXPECT_EQ(by_file.info().count, n);
  EXPECT_TRUE(looks_like_lmdb(tmp.sub("db")));
  EXPECT_TRUE(looks_like_lmdb(tmp.sub("db") + "/data.mdb"));
}

TEST(LmdbDataset, MeanStdComputedAndSidecarMetadataWins) {
  TempDir tmp;
  std::vector<std::pair<std::string, std::string>> kv;
  for (int i = 0; i < 4; ++i) {
    std::vector<uint8_t> img(2 * 2 * 1, static_cast<uint8_t>(i * 10));  // values 0,10,20,30
    kv.emplace_back(lmdb_record_key(i, "x"), serialize_datum(make_raw_datum(img.data(), 2, 2, 1, i)));
  }
  write_db(tmp.sub("db"), kv);
  {
    LmdbDataset ds(tmp.sub("db"));
    ASSERT_EQ(ds.info().mean.size(), 1u);
    EXPECT_NEAR(ds.info().mean[0], 15.0f, 1e-4);
    EXPECT_NEAR(ds.info().std[0], std::sqrt(125.0f), 1e-3);
  }
  LmdbMeta meta;
  meta.num_classes = 10;
  meta.mean = {1.5f};
  meta.std = {2.5f};
  for (int i = 0; i < 10; ++i) meta.class_names.push_back("class " + std::to_string(i));
  write_lmdb_meta(lmdb_meta_path(tmp.sub("db")), meta);
  LmdbDataset ds(tmp.sub("db"));
  EXPECT_EQ(ds.info().num_classes, 10);
  EXPECT_EQ(ds.info().mean, std::vector<float>{1.5f});
  EXPECT_EQ(ds.info().std, std::vector<float>{2.5f});
  EXPECT_EQ(ds.info().class_names[9], "class 9");
}

TEST(LmdbDataset, FloatDataRecords) {
  TempDir tmp;
  Datum d;
  d.channels = 1, d.height = 1, d.width = 3, d.label = 1, d.has_label = true;
  d.float_data = {0.0f, 128.0f, 255.0f};
  Datum bad = d;
  bad.float_data = {0.0f, 0.5f, 1.0f};  // normalised floats: not 8-bit pixels
  write_db(tmp.sub("db"), {{"a", serialize_datum(d)}, {"b", serialize_datum(bad)}});
  LmdbOptions opt;
  opt.stats_samples = 1;
  LmdbDataset ds(tmp.sub("db"), opt);
  uint8_t px[3];
  int32_t label;
  int64_t id = 0;
  ds.read(&id, 1, px, &label);
  EXPECT_EQ(px[1], 128);
  EXPECT_EQ(label, 1);
  id = 1;
  expect_data_error([&] { ds.read(&id, 1, px, &label); }, {tmp.sub("db"), "key 'b'", "not integers in 0..255"});
}

TEST(LmdbDataset, EncodedPngIsExactAndJpegIsClose) {
  TempDir tmp;
  const int h = 24, w = 32;
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<std::vector<uint8_t>> imgs;
  for (int i = 0; i < 6; ++i) {
    imgs.push_back(gradient_image(h, w, 3, i * 11));
    std::string file = i % 2 ? encode_png(imgs[i].data(), h, w, 3) : encode_jpeg(imgs[i].data(), h, w, 3, 95);
    kv.emplace_back(lmdb_record_key(i, i % 2 ? "p.png" : "j.jpg"), serialize_datum(make_encoded_datum(file, i)));
  }
  write_db(tmp.sub("db"), kv);
  LmdbDataset ds(tmp.sub("db"));
  EXPECT_TRUE(ds.has_encoded());
  ASSERT_EQ(ds.info().height, h);
  ASSERT_EQ(ds.info().width, w);
  ASSERT_EQ(ds.info().channels, 3);
  std::vector<uint8_t> out(ds.info().sample_bytes());
  for (int64_t i = 0; i < 6; ++i) {
    int32_t label;
    ds.read(&i, 1, out.data(), &label);
    EXPECT_EQ(label, i);
    double err = 0;
    for (size_t p = 0; p < out.size(); ++p) err += std::abs(int(out[p]) - int(imgs[i][p]));
    err /= out.size();
    if (i % 2) EXPECT_EQ(err, 0.0) << "PNG must be lossless";
    else EXPECT_LT(err, 3.0) << "JPEG record " << i;
  }
}

TEST(LmdbDataset, EncodedMixedSizesNeedTargetSize) {
  TempDir tmp;
  auto a = gradient_image(20, 30, 3, 0), b = gradient_image(40, 25, 3, 5);
  write_db(tmp.sub("db"), {{"a", serialize_datum(make_encoded_datum(encode_png(a.data(), 20, 30, 3), 0))},
                           {"b", serialize_datum(make_encoded_datum(encode_png(b.data(), 40, 25, 3), 1))}});
  LmdbOptions opt;
  opt.stats_samples = 1;  // only record a: the size problem shows when b is read
  LmdbDataset plain(tmp.sub("db"), opt);
  std::vector<uint8_t> out(plain.info().sample_bytes());
  int32_t label;
  int64_t id = 1;
  expect_data_error([&] { plain.read(&id, 1, out.data(), &label); }, {"key 'b'", "40x25", "--data.image_size HxW"});

  opt.transform.height = opt.transform.width = 16;
  opt.transform.mode = ResizeMode::kCenterCrop;
  LmdbDataset eval(tmp.sub("db"), opt);
  EXPECT_EQ(eval.info().height, 16);
  out.resize(eval.info().sample_bytes());
  eval.read(&id, 1, out.data(), &label);
  EXPECT_EQ(label, 1);

  opt.transform.mode = ResizeMode::kRandomResizedCrop;
  opt.transform.seed = 5;
  LmdbDataset train(tmp.sub("db"), opt);
  std::vector<uint8_t> e0(out.size()), e0b(out.size()), e1(out.size());
  train.read(&id, 1, e0.data(), &label);
  train.read(&id, 1, e0b.data(), &label);
  train.set_epoch(1);
  train.read(&id, 1, e1.data(), &label);
  EXPECT_EQ(e0, e0b) << "augmentation must be keyed by (seed, epoch, id) only";
  EXPECT_NE(e0, e1) << "a new epoch draws a new crop";
}

TEST(LmdbDataset, ThreadedReadsMatchSingleThreadAndRethrowErrors) {
  TempDir tmp;
  std::vector<std::pair<std::string, std::string>> kv;
  for (int i = 0; i < 40; ++i) {
    auto img = gradient_image(12 + i % 5, 10, 3, i);
    kv.emplace_back(lmdb_record_key(i, "x"),
                    serialize_datum(make_encoded_datum(encode_png(img.data(), 12 + i % 5, 10, 3), i % 7)));
  }
  auto img = gradient_image(12, 10, 3, 0);
  std::string cut = encode_png(img.data(), 12, 10, 3);
  cut.resize(cut.size() - 20);  // header intact (passes open), pixel data cut short
  kv.emplace_back(lmdb_record_key(40, "bad"), serialize_datum(make_encoded_datum(cut, 0)));
  write_db(tmp.sub("db"), kv);
  LmdbOptions opt;
  opt.stats_samples = 0;
  opt.transform.height = opt.transform.width = 9;
  opt.transform.mode = ResizeMode::kRandomResizedCrop;
  LmdbDataset one(tmp.sub("db"), opt);
  opt.read_threads = 3;
  LmdbDataset three(tmp.sub("db"), opt);
  std::vector<int64_t> ids(40);
  for (int i = 0; i < 40; ++i) ids[i] = (i * 17) % 40;
  std::vector<uint8_t> a(40 * one.info().sample_bytes()), b(a.size());
  std::vector<int32_t> la(40), lb(40);
  one.read(ids.data(), 40, a.data(), la.data());
  three.read(ids.data(), 40, b.data(), lb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(la, lb);
  ids.push_back(40);
  a.resize(41 * one.info().sample_bytes());
  la.resize(41);
  expect_data_error([&] { three.read(ids.data(), 41, a.data(), la.data()); }, {"bad", "bad PNG"});
}

TEST(LmdbDataset, GrayJpegConvertedToThreeChannelsOnRequest) {
  TempDir tmp;
  auto g = gradient_image(8, 8, 1, 0);
  write_db(tmp.sub("db"), {{"g", serialize_datum(make_encoded_datum(encode_jpeg(g.data(), 8, 8, 1), 0))}});
  LmdbOptions opt;
  opt.channels = 3;
  LmdbDataset ds(tmp.sub("db"), opt);
  EXPECT_EQ(ds.info().channels, 3);
}

TEST(LmdbDataset, BadInputsNameFileKeyAndRemedy) {
  TempDir tmp;
  std::ofstream(tmp.sub("text.txt")) << "hello, not a database";
  expect_data_error([&] { LmdbDataset ds(tmp.sub("text.txt")); }, {"text.txt", "is not an LMDB"});
  std::filesystem::create_directory(tmp.sub("nodb"));
  expect_data_error([&] { LmdbDataset ds(tmp.sub("nodb")); }, {"nodb", "data.mdb"});
  EXPECT_FALSE(looks_like_lmdb(tmp.sub("text.txt")));
  EXPECT_FALSE(looks_like_lmdb(tmp.sub("nodb")));

  write_db(tmp.sub("empty"), {});
  expect_data_error([&] { LmdbDataset ds(tmp.sub("empty")); }, {"empty", "is empty"});

  auto img = random_image(4, 4, 1, 1);
  const std::string good = serialize_datum(make_raw_datum(img.data(), 4, 4, 1, 0));
  Datum short_d = make_raw_datum(img.data(), 4, 4, 1, 1);
  short_d.data.pop_back();
  write_db(tmp.sub("notdatum"), {{"k0", good}, {"k1", "\xff\xff\xff junk"}});
  expect_data_error([&] { LmdbDataset ds(tmp.sub("notdatum")); },
                    {"notdatum", "key 'k1'", "not a Caffe Datum", "on_bad_sample skip"});
  write_db(tmp.sub("size"), {{"k0", good}, {"k1", serialize_datum(short_d)}});
  expect_data_error([&] { LmdbDataset ds(tmp.sub("size")); },
                    {"size", "key 'k1'", "15 bytes but channels*height*width = 1*4*4 = 16"});
  write_db(tmp.sub("neg"), {{"k0", good}, {"k1", serialize_datum(make_raw_datum(img.data(), 4, 4, 1, -1))}});
  expect_data_error([&] { LmdbDataset ds(tmp.sub("neg")); }, {"key 'k1'", "label -1 is outside"});
  write_db(tmp.sub("big"), {{"k0", good}, {"k1", serialize_datum(make_raw_datum(img.data(), 4, 4, 1, 12))}});
  LmdbOptions ten;
  ten.num_classes = 10;
  expect_data_error([&] { LmdbDataset ds(tmp.sub("big"), ten); }, {"key 'k1'", "label 12 is outside [0, 10)"});
  LmdbMeta meta;
  meta.num_classes = 10;
  write_lmdb_meta(lmdb_meta_path(tmp.sub("big")), meta);
  expect_data_error([&] { LmdbDataset ds(tmp.sub("big")); }, {"key 'k1'", "cnntrain_meta.txt"});
  auto other = random_image(5, 4, 1, 2);
  write_db(tmp.sub("shape"), {{"k0", good}, {"k1", serialize_datum(make_raw_datum(other.data(), 5, 4, 1, 0))}});
  expect_data_error([&] { LmdbDataset ds(tmp.sub("shape")); }, {"key 'k1'", "1x5x4", "--data.image_size HxW"});
}

TEST(LmdbDataset, CorruptJpegFailsOrIsSkippedAndCounted) {
  TempDir tmp;
  auto img = gradient_image(16, 16, 3, 0);
  const std::string jpeg = encode_jpeg(img.data(), 16, 16, 3);
  const std::string truncated = jpeg.substr(0, jpeg.size() - 12);
  write_db(tmp.sub("db"), {{"00000000_a.jpg", serialize_datum(make_encoded_datum(jpeg, 0))},
                           {"00000001_b.jpg", serialize_datum(make_encoded_datum(truncated, 1))},
                           {"00000002_c.jpg", serialize_datum(make_encoded_datum(jpeg, 2))}});
  LmdbOptions opt;
  opt.stats_samples = 1;
  LmdbDataset fail(tmp.sub("db"), opt);
  std::vector<uint8_t> out(fail.info().sample_bytes());
  int32_t label;
  int64_t id = 1;
  expect_data_error([&] { fail.read(&id, 1, out.data(), &label); },
                    {tmp.sub("db"), "key '00000001_b.jpg'", "bad JPEG", "on_bad_sample skip"});
  // Stats over every record find it at open already.
  expect_data_error([&] { LmdbDataset ds(tmp.sub("db")); }, {"key '00000001_b.jpg'", "bad JPEG"});

  opt.on_bad_sample = "skip";
  LmdbDataset skip(tmp.sub("db"), opt);
  skip.read(&id, 1, out.data(), &label);
  EXPECT_EQ(label, 2) << "the next good record stands in";
  EXPECT_EQ(skip.skipped_at_read(), 1);

  // Records bad at open are left out of the index and counted.
  write_db(tmp.sub("db2"), {{"a", serialize_datum(make_encoded_datum(jpeg, 0))}, {"b", "garbage"},
                            {"c", serialize_datum(make_encoded_datum(jpeg, 1))}});
  LmdbDataset s2(tmp.sub("db2"), opt);
  EXPECT_EQ(s2.info().count, 2);
  EXPECT_EQ(s2.skipped_at_open(), 1);
  EXPECT_EQ(s2.key(1), "c");
}

TEST(LmdbDataset, WriterRefusesDuplicateKeysAndAcceptsUnsortedOnes) {
  TempDir tmp;
  auto img = random_image(2, 2, 1, 0);
  const std::string v = serialize_datum(make_raw_datum(img.data(), 2, 2, 1, 0));
  write_db(tmp.sub("unsorted"), {{"b", v}, {"a", v}, {"c", v}});
  EXPECT_EQ(LmdbDataset(tmp.sub("unsorted")).info().count, 3);
  expect_data_error([&] { write_db(tmp.sub("dup"), {{"a", v}, {"b", v}, {"a", v}}); }, {"key 'a' written twice"});
}

TEST(LmdbDataset, OptionErrorsAreUsageErrors) {
  LmdbOptions opt;
  opt.on_bad_sample = "ignore";
  try {
    LmdbDataset ds("/nonexistent", opt);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
  }
}

}  // namespace
}  // namespace cnn
