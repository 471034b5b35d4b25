// Fine-tuning's pieces: the safetensors reader (types, damaged files), --init.from's matching by name (PyTorch's
// OIHW converted, num_batches_tracked and "module." ignored, missing/mismatched/skipped tensors keeping their
// fresh values, --init.strict), name patterns and the freeze plan, and frozen training: no gradient below the
// lowest trained layer, no update (not even weight decay) of frozen parameters, batch norm of the frozen part
// left as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "src/base/error.h"
#include "src/base/half_bits.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/train/freeze.h"
#include "src/train/init_from.h"
#include "src/train/optimizer.h"
#include "src/train/safetensors.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::expect_throws;
using test::make_reference_backend;
using test::random_vec;

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A safetensors file's bytes, as the format's reference writer lays them out.
std::string safetensors_bytes(const std::vector<Entry>& entries, const std::string& header_override = "") {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}", data;
  for (const Entry& e : entries) {
    std::string shape;
    for (int64_t d : e.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += strprintf(",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}", e.name.c_str(),
                        e.dtype.c_str(), shape.c_str(), data.size(), data.size() + e.bytes.size());
    data += e.bytes;
  }
  header += "}";
  if (!header_override.empty()) header = header_override;
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>(n >> (8 * k));
  return out + header + data;
}

std::string f32(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), 4 * v.size()); }

std::string u16(const std::vector<uint16_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), 2 * v.size());
}

TEST(Safetensors, ReadsF32F16Bf16AndLeavesIntegersOut) {
  const std::string bytes = safetensors_bytes(
      {{"a", "F32", {2, 1}, f32({1.5f, -2.f})},
       {"h", "F16", {2}, u16({simt::detail::float_to_half_bits(0.25f), simt::detail::float_to_half_bits(-3.f)})},
       {"b", "BF16", {1}, u16({simt::detail::float_to_bf16_bits(6.f)})},
       {"bn.num_batches_tracked", "I64", {}, std::string(8, '\x07')}});
  const SafetensorsFile f = parse_safetensors(bytes, "mem");
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.tensors[0].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(f.tensors[0].data, (std::vector<float>{1.5f, -2.f}));
  EXPECT_EQ(f.tensors[1].data, (std::vector<float>{0.25f, -3.f}));
  EXPECT_EQ(f.tensors[2].data, (std::vector<float>{6.f}));
  EXPECT_EQ(f.skipped, (std::vector<std::string>{"bn.num_batches_tracked (I64)"}));
}

TEST(Safetensors, RefusesDamagedFiles) {
  const std::string ok = safetensors_bytes({{"a", "F32", {2}, f32({1.f, 2.f})}});
  expect_throws([&] { parse_safetensors(ok.substr(0, ok.size() - 1), "cut"); }, kExitUsage, "damaged");
  expect_throws([&] { parse_safetensors(ok.substr(0, 5), "tiny"); }, kExitUsage, "8-byte header length");
  expect_throws([&] { parse_safetensors(ok.substr(0, 20), "short"); }, kExitUsage, "exceeds the file");
  expect_throws([&] { parse_safetensors(safetensors_bytes({{"a", "F32", {3}, f32({1.f, 2.f})}}), "size"); },
                kExitUsage, "data_offsets");
  expect_throws([&] { parse_safetensors(safetensors_bytes({{"a", "F8", {1}, "x"}}), "type"); }, kExitUsage,
                "dtype F8");
  expect_throws([&] { parse_safetensors(safetensors_bytes({}, "{\"a\":{\"dtype\":\"F32\""), "json"); },
                kExitUsage, "bad header");
  expect_throws([&] { parse_safetensors(safetensors_bytes({}, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}"), "offs"); },
                kExitUsage, "data_offsets");
  // Skipped metadata nested deeper than the parser follows: refused, not a stack overflow.
  const std::string deep = "{\"__metadata__\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_throws([&] { parse_safetensors(safetensors_bytes({}, deep), "deep"); }, kExitUsage, "nested");
}

// conv1 (3x3, 2 -> 3 channels) + bn1 + pool + fc, as the zoo names them.
void build_small(Net& net) {
  net.add(make_conv2d("conv1", 3, {3, 1, 1, false}));
  net.add(make_batchnorm("bn1", {}, true));
  net.add(make_global_avgpool("avgpool"));
  net.add(make_linear("fc", net.num_classes()));
}

std::vector<float> host(Backend& be, const float* d, size_t n) {
  std::vector<float> v(n);
  be.download(v.data(), d, sizeof(float) * n);
  return v;
}

TEST(InitFrom, SafetensorsByNameWithOihwConvertedAndMismatchesFresh) {
  test::TempDir dir;
  auto be = make_reference_backend();
  Net net(*be, Dims{4, 4, 2}, 5);
  build_small(net);
  net.build(2, 1);
  const std::vector<float> before = host(*be, static_cast<const Net&>(net).params(), net.num_params());
  const std::vector<float> oihw = random_vec(3 * 2 * 3 * 3, 1);
  const std::string path = dir.file("w.safetensors");
  std::ofstream(path, std::ios::binary) << safetensors_bytes(
      {{"module.conv1.weight", "F32", {3, 2, 3, 3}, f32(oihw)},
       {"bn1.weight", "F32", {3}, f32({2.f, 3.f, 4.f})},
       {"bn1.bias", "F32", {3}, f32({.5f, .5f, .5f})},
       {"bn1.running_mean", "F32", {3}, f32({.1f, .2f, .3f})},
       {"bn1.num_batches_tracked", "I64", {}, std::string(8, '\0')},
       {"fc.weight", "F32", {10, 3}, f32(random_vec(30, 2))},  // another class count
       {"extra.weight", "F32", {1}, f32({1.f})}});
  const InitFromReport r = init_from_file(net, {path, "bn1.bias", false});
  EXPECT_EQ(r.format, "safetensors");
  EXPECT_EQ(r.loaded, 3u);  // conv1.weight, bn1.weight, bn1.running_mean
  EXPECT_EQ(r.missing, (std::vector<std::string>{"fc.bias", "bn1.running_var"}));
  EXPECT_EQ(r.mismatched, (std::vector<std::string>{"fc.weight: file 10x3, model 5x3"}));
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"bn1.bias"}));
  EXPECT_EQ(r.unused, (std::vector<std::string>{"extra.weight"}));
  const std::vector<float> p = host(*be, static_cast<const Net&>(net).params(), net.num_params());
  const std::vector<float> b = host(*be, net.buffers(), net.num_buffers());
  for (const ParamInfo& t : net.param_table()) {
    if (t.name == "conv1.weight") {
      for (int k = 0; k < 3; ++k)
        for (int c = 0; c < 2; ++c)
          for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 3; ++x)
              ASSERT_EQ(p[t.offset + ((k * 3 + y) * 3 + x) * 2 + c], oihw[((k * 2 + c) * 3 + y) * 3 + x]);
    } else if (t.name == "bn1.weight") {
      EXPECT_EQ(p[t.offset + 2], 4.f);
    } else {  // skipped, mismatched, missing: as Net::build initialised them
      for (size_t i = 0; i < t.size; ++i) ASSERT_EQ(p[t.offset + i], before[t.offset + i]) << t.name;
    }
  }
  EXPECT_EQ(b[net.buffer_table()[0].offset + 1], .2f);  // running_mean
  EXPECT_EQ(b[net.buffer_table()[1].offset], 1.f);      // running_var: fresh
  expect_throws([&] { init_from_file(net, {path, "", true}); }, kExitUsage,
                {"--init.strict", "fc.bias, bn1.running_var", "fc.weight: file 10x3, model 5x3"});
  const std::string other = dir.file("other.safetensors");
  std::ofstream(other, std::ios::binary) << safetensors_bytes({{"x.weight", "F32", {1}, f32({1.f})}});
  expect_throws([&] { init_from_file(net, {other, "", false}); }, kExitUsage, "another model?");
}

TEST(Freeze, PatternsMatchWholeNameComponents) {
  const NamePattern p("layer1,conv1.", "train.freeze");
  EXPECT_TRUE(p.matches("layer1.0.conv1.weight"));
  EXPECT_TRUE(p.matches("layer1"));
  EXPECT_FALSE(p.matches("layer10.weight"));
  EXPECT_TRUE(p.matches("conv1.weight"));
  const NamePattern re("re:^layer[12]\\..*bn", "train.freeze");
  EXPECT_TRUE(re.matches("layer2.0.bn1.weight"));
  EXPECT_FALSE(re.matches("layer3.0.bn1.weight"));
  expect_throws([] { NamePattern("re:(", "train.freeze"); }, kExitUsage, "--train.freeze");
  expect_throws([] { NamePattern("a,,b", "init.skip"); }, kExitUsage, "empty name prefix");
}

TEST(Freeze, PlanStopsBackwardAtTheLowestTrainedLayer) {
  auto be = make_reference_backend();
  Net net(*be, Dims{4, 4, 2}, 5);
  build_small(net);
  net.build(2, 1);
  const FreezePlan p = plan_freeze(net, "conv1,bn1", "fc.bias=0.5");
  EXPECT_EQ(p.stop_layer, 3u);  // fc (avgpool has no parameters)
  EXPECT_EQ(p.trainable_offset, net.param_table()[3].offset);
  EXPECT_EQ(p.lr_mult, (std::vector<float>{0.f, 0.f, 0.f, 1.f, 0.5f}));
  EXPECT_EQ(p.frozen.size(), 3u);
  expect_throws([&] { plan_freeze(net, "layer9", ""); }, kExitUsage, "matches no parameter");
  expect_throws([&] { plan_freeze(net, "", "fc=x"); }, kExitUsage, "PATTERN=X");
  expect_throws([&] { plan_freeze(net, "re:.", ""); }, kExitUsage, "no parameter to train");
}

TEST(Freeze, FrozenPartGetsNoGradientNoUpdateAndKeepsItsStatistics) {
  auto be = make_reference_backend();
  Net net(*be, Dims{4, 4, 2}, 5);
  build_small(net);
  net.build(4, 1);
  const FreezePlan plan = plan_freeze(net, "conv1,bn1", "");
  net.set_frozen_below(plan.stop_layer, true);
  OptimizerConfig oc;
  oc.weight_decay = 0.1;  // would move frozen weights even with a zero gradient
  oc.decay_bn_bias = true;
  oc.lr_mult = plan.lr_mult;
  auto opt = make_optimizer(oc, *be, net);
  const std::vector<float> x = random_vec(4 * 4 * 4 * 2, 3), dl = random_vec(4 * 5, 4);
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  float* d_dl = static_cast<float*>(be->alloc(sizeof(float) * dl.size()));
  be->upload(d_x, x.data(), sizeof(float) * x.size());
  be->upload(d_dl, dl.data(), sizeof(float) * dl.size());
  const std::vector<float> p0 = host(*be, static_cast<const Net&>(net).params(), net.num_params());
  const std::vector<float> b0 = host(*be, net.buffers(), net.num_buffers());
  net.zero_grads();
  net.forward(d_x, 4, true);
  net.backward(d_dl, 4);
  const std::vector<float> g = host(*be, net.grads(), net.num_params());
  opt->step(0.1);
  const std::vector<float> p1 = host(*be, static_cast<const Net&>(net).params(), net.num_params());
  for (size_t i = 0; i < net.num_params(); ++i) {
    const bool frozen = i < plan.trainable_offset;
    if (frozen) {
      ASSERT_EQ(g[i], 0.f) << i;
      ASSERT_EQ(p1[i], p0[i]) << i;
    }
  }
  EXPECT_NE(p1[plan.trainable_offset], p0[plan.trainable_offset]);  // fc trains
  EXPECT_EQ(host(*be, net.buffers(), net.num_buffers()), b0);      // frozen batch norm: running statistics kept
  // Without freeze_bn the frozen batch norm normalises with (and updates) batch statistics.
  net.set_frozen_below(plan.stop_layer, false);
  net.forward(d_x, 4, true);
  EXPECT_NE(host(*be, net.buffers(), net.num_buffers()), b0);
  be->release(d_x);
  be->release(d_dl);
}

// --train.lr_mult: a factor scales the learning rate of its parameters' update (SGD with momentum and decay).
TEST(Freeze, LearningRateFactorsScaleTheUpdate) {
  auto be = make_reference_backend();
  std::vector<float> after[2];
  for (int k = 0; k < 2; ++k) {
    Net net(*be, Dims{4, 4, 2}, 5);
    build_small(net);
    net.build(2, 1);
    OptimizerConfig oc;
    oc.weight_decay = 0.01;
    if (k == 1) oc.lr_mult = plan_freeze(net, "", "re:.=0.5").lr_mult;
    auto opt = make_optimizer(oc, *be, net);
    const std::vector<float> g = random_vec(net.num_params(), 5);
    be->upload(net.grads(), g.data(), sizeof(float) * g.size());
    opt->step(k == 0 ? 0.1 : 0.2);
    after[k] = host(*be, static_cast<const Net&>(net).params(), net.num_params());
  }
  EXPECT_EQ(after[0], after[1]);
}

}  // namespace
}  // namespace cnn
