// CIFAR-10/100 binary -> HDF5 on files written here in the official record format.
#include <fstream>

#include "io/convert_cifar.h"
#include "io/hdf5_dataset.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// Pixel (channel c, row y, column x) of record r: a value that identifies all four.
uint8_t px(int r, int c, int y, int x) { return static_cast<uint8_t>((r * 53 + c * 101 + y * 7 + x * 3) % 256); }

void write_records(const std::string& path, int first, int n, int label_bytes) {
  std::ofstream f(path, std::ios::binary);
  for (int r = first; r < first + n; ++r) {
    if (label_bytes == 2) f.put(static_cast<char>(r % 20));  // coarse
    f.put(static_cast<char>(label_bytes == 1 ? r % 10 : (r * 3) % 100));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) f.put(static_cast<char>(px(r, c, y, x)));
  }
}

void expect_error(const CifarConvertOptions& o, int code, const std::string& needle) {
  test::expect_throws([&] { convert_cifar_to_hdf5(o); }, code, needle);
}

TEST(Cifar, TenTwoFilesToHwc) {
  test::TempDir d;
  write_records(d.file("a.bin"), 0, 5, 1);
  write_records(d.file("b.bin"), 5, 3, 1);
  CifarConvertOptions o;
  o.inputs = {d.file("a.bin"), d.file("b.bin")};
  o.out = d.file("c10.h5");
  convert_cifar_to_hdf5(o);
  auto ds = open_hdf5_dataset(o.out);
  const DatasetInfo& i = ds->info();
  ASSERT_EQ(i.count, 8);
  EXPECT_EQ(i.height, 32);
  EXPECT_EQ(i.width, 32);
  EXPECT_EQ(i.channels, 3);
  EXPECT_EQ(i.num_classes, 10);
  std::vector<int64_t> ids = {6, 0};
  std::vector<uint8_t> img(2 * 3072);
  std::vector<int32_t> lab(2);
  ds->read(ids.data(), 2, img.data(), lab.data());
  EXPECT_EQ(lab, (std::vector<int32_t>{6, 0}));
  int bad = 0;
  for (int k = 0; k < 2; ++k)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c) bad += img[k * 3072 + (y * 32 + x) * 3 + c] != px(ids[k], c, y, x);
  EXPECT_EQ(bad, 0) << "pixels not moved from CHW to HWC";
}

TEST(Cifar, HundredFineAndCoarseLabels) {
  test::TempDir d;
  write_records(d.file("train.bin"), 0, 7, 2);
  CifarConvertOptions o;
  o.inputs = {d.file("train.bin")};
  o.variant = 100;
  o.out = d.file("fine.h5");
  convert_cifar_to_hdf5(o);
  auto fine = open_hdf5_dataset(o.out);
  EXPECT_EQ(fine->info().num_classes, 100);
  EXPECT_EQ(fine->label(5), 15);
  o.coarse = true;
  o.out = d.file("coarse.h5");
  o.stats_from = d.file("fine.h5");
  convert_cifar_to_hdf5(o);
  auto coarse = open_hdf5_dataset(o.out);
  EXPECT_EQ(coarse->info().num_classes, 20);
  EXPECT_EQ(coarse->label(5), 5);
  EXPECT_EQ(coarse->info().mean, fine->info().mean);
}

TEST(Cifar, BadFiles) {
  test::TempDir d;
  write_records(d.file("ten.bin"), 0, 2, 1);
  CifarConvertOptions o;
  o.out = d.file("x.h5");
  o.inputs = {d.file("missing.bin")};
  expect_error(o, kExitData, "missing.bin");
  // A CIFAR-10 file read as CIFAR-100 is not a whole number of 3074-byte records.
  o.inputs = {d.file("ten.bin")};
  o.variant = 100;
  expect_error(o, kExitData, "3074-byte");
  std::ofstream(d.file("label.bin"), std::ios::binary) << std::string(1, char(12)) << std::string(3072, 'x');
  o.inputs = {d.file("label.bin")};
  o.variant = 10;
  expect_error(o, kExitData, "label 12");
  o.variant = 7;
  expect_error(o, kExitUsage, "--variant");
}

}  // namespace
}  // namespace cnn
