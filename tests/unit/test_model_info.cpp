// What checkpoints and exports record for prediction (src/checkpoint/model_info.h), in HDF5 attributes and as
// ONNX metadata_props, and the confusion matrix of --eval-only (src/train/eval_report.h).
#include <gtest/gtest.h>

#include <cmath>

#include "io/h5_util.h"
#include "src/checkpoint/model_info.h"
#include "src/train/eval_report.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

ModelInfo sample_info() {
  ModelInfo m;
  m.num_classes = 3;
  m.class_names = {"cat", "dog, big", "a\\\\b"};
  m.mean = {72.94, 100.5, 3.25};
  m.std = {90.0, 1.5, 64.125};
  m.height = 28, m.width = 32, m.channels = 3;
  return m;
}

void expect_same(const ModelInfo& a, const ModelInfo& b) {
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.class_names, b.class_names);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.channels, b.channels);
}

TEST(ModelInfo, Hdf5AttributesRoundTripAndOlderFilesReadAsUnrecorded) {
  test::TempDir dir;
  const std::string path = dir.path() + "/m.h5";
  {
    std::lock_guard<std::mutex> lk(h5_mutex());
    H5Handle f = h5_file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    write_model_info(f.get(), sample_info());
  }
  std::lock_guard<std::mutex> lk(h5_mutex());
  H5Handle f = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  expect_same(read_model_info(f.get()), sample_info());
  const std::string old = dir.path() + "/old.h5";
  H5Handle o = h5_file(H5Fcreate(old.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  const ModelInfo none = read_model_info(o.get());
  EXPECT_EQ(none.num_classes, 0);
  EXPECT_FALSE(none.has_stats());
  EXPECT_FALSE(none.has_input_size());
  EXPECT_TRUE(none.class_names.empty());
}

TEST(ModelInfo, OnnxMetadataPropsRoundTripWithCommasInNames) {
  const auto props = model_info_props(sample_info());
  EXPECT_EQ(props.at("input_size"), "28x32x3");
  EXPECT_EQ(props.at("num_classes"), "3");
  expect_same(model_info_from_props(props), sample_info());
  EXPECT_TRUE(model_info_props(ModelInfo()).empty());
}

TEST(EvalReport, ConfusionCountsArgmaxPerTrueClass) {
  const float logits[] = {1, 5, 2,  9, 0, 0,  0, 0, 3,  0, 4, 1};
  const int32_t labels[] = {1, 0, 1, 1};
  std::vector<int64_t> m(9, 0);
  add_confusion(4, 3, logits, labels, m);
  EXPECT_EQ(m, (std::vector<int64_t>{1, 0, 0, 0, 2, 1, 0, 0, 0}));
  const std::vector<double> acc = per_class_accuracy(m, 3);
  EXPECT_DOUBLE_EQ(acc[0], 1.0);
  EXPECT_DOUBLE_EQ(acc[1], 2.0 / 3);
  EXPECT_TRUE(std::isnan(acc[2]));  // no sample of class 2
  const std::string png = confusion_png(m, 3);
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace cnn
