// The policy behind the CUDA backend's vendor-library paths, without the libraries: which algorithm wins,
// what rules candidates out (and how that is reported), per-shape caching and the once-per-layer fallback log.
#include <gtest/gtest.h>

#include "io/synthetic_dataset.h"
#include "kernels/cuda/vendor/algo_select.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

AlgoCandidate cand(int algo, bool ok, float time, size_t ws, bool det = true) {
  AlgoCandidate c;
  c.algo = algo, c.ok = ok, c.time_ms = time, c.workspace = ws, c.deterministic = det;
  return c;
}

TEST(AlgoSelect, HeuristicOrderWinsAmongUsable) {
  AlgoPolicy p;
  p.workspace_cap = 100;
  // Untimed (heuristic rank): the first that runs and fits.
  const AlgoChoice c = choose_algo({cand(7, false, -1, 0), cand(3, true, -1, 500), cand(5, true, -1, 80),
                                    cand(1, true, -1, 0)}, p);
  EXPECT_EQ(c.algo, 5);
  EXPECT_EQ(c.workspace, 80u);
  EXPECT_TRUE(c.why_none.empty());
}

TEST(AlgoSelect, SaysWhichPreferredAlgorithmTheCapRuledOut) {
  AlgoPolicy p;
  p.workspace_cap = size_t{512} << 20;
  // Heuristic order: algorithm 1 first but too big, 0 chosen; algorithm 3 (after the chosen) is not mentioned.
  AlgoChoice c = choose_algo({cand(5, false, -1, 0), cand(1, true, -1, size_t{1536} << 20), cand(0, true, -1, 0),
                              cand(3, true, -1, size_t{4096} << 20)}, p);
  EXPECT_EQ(c.algo, 0);
  EXPECT_EQ(c.passed_over, "algorithm 1, ranked before the chosen 0, needs 1536.0 MiB of workspace, over the 512 MiB "
                           "cap (raise --cudnn.workspace_mb to let it run)");
  // The first preference fits: nothing to say; a timed choice: the search measured only what fits.
  EXPECT_TRUE(choose_algo({cand(0, true, -1, 0), cand(1, true, -1, size_t{1536} << 20)}, p).passed_over.empty());
  EXPECT_TRUE(choose_algo({cand(1, true, -1, size_t{1536} << 20), cand(0, true, 2.f, 0)}, p).passed_over.empty());
  // A candidate --deterministic would refuse anyway is no loss to the cap; nothing found: why_none says it all.
  p.deterministic = true;
  EXPECT_TRUE(
      choose_algo({cand(1, true, -1, size_t{1536} << 20, false), cand(0, true, -1, 0)}, p).passed_over.empty());
  c = choose_algo({cand(1, true, -1, size_t{1536} << 20)}, p);
  EXPECT_FALSE(c.found());
  EXPECT_TRUE(c.passed_over.empty());
}

TEST(AlgoSelect, FastestTimedWinsAndBeatsUntimed) {
  AlgoPolicy p;
  p.workspace_cap = 1000;
  EXPECT_EQ(choose_algo({cand(1, true, -1, 0), cand(2, true, 3.f, 0), cand(3, true, 1.5f, 10), cand(4, true, 1.5f, 0)},
                        p).algo, 3);  // equal times keep the library's order
  EXPECT_EQ(choose_algo({cand(2, true, 3.f, 0), cand(9, true, 0.5f, 2000)}, p).algo, 2);  // the faster one is too big
}

TEST(AlgoSelect, DeterministicPolicySkipsNondeterministic) {
  AlgoPolicy p;
  p.workspace_cap = 1 << 20;
  const std::vector<AlgoCandidate> v{cand(1, true, 1.f, 0, false), cand(2, true, 2.f, 0, true)};
  EXPECT_EQ(choose_algo(v, p).algo, 1);
  p.deterministic = true;
  EXPECT_EQ(choose_algo(v, p).algo, 2);
}

TEST(AlgoSelect, NothingUsableSaysWhy) {
  AlgoPolicy p;
  p.workspace_cap = size_t{64} << 20;
  p.deterministic = true;
  const AlgoChoice c = choose_algo({cand(1, false, -1, 0), cand(2, true, -1, size_t{300} << 20),
                                    cand(3, true, -1, size_t{100} << 20), cand(4, true, -1, 0, false)}, p);
  EXPECT_FALSE(c.found());
  EXPECT_NE(c.why_none.find("4 candidates (1 not supported"), std::string::npos) << c.why_none;
  EXPECT_NE(c.why_none.find("2 needing more workspace than the 64 MiB cap (the smallest 100.0 MiB"), std::string::npos)
      << c.why_none;
  EXPECT_NE(c.why_none.find("1 not deterministic"), std::string::npos) << c.why_none;
  EXPECT_FALSE(choose_algo({}, p).found());
}

TEST(AlgoSelect, ShapeCacheDecidesOncePerKey) {
  ShapeCache<int> cache;
  int made = 0;
  auto make = [&] { return ++made * 10; };
  EXPECT_EQ(cache.get({1, 2, 3}, make), 10);
  EXPECT_EQ(cache.get({1, 2, 3}, make), 10);
  EXPECT_EQ(cache.get({1, 2, 4}, make), 20);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 2);
}

TEST(AlgoSelect, FallbackLoggedOncePerLayerAndOp) {
  std::vector<std::string> lines;
  FallbackLog log([&](const std::string& s) { lines.push_back(s); });
  EXPECT_TRUE(log.note("res2.conv1", "cuDNN convolution forward", "no usable algorithm"));
  EXPECT_FALSE(log.note("res2.conv1", "cuDNN convolution forward", "no usable algorithm"));
  EXPECT_TRUE(log.note("res2.conv1", "cuDNN convolution backward-data", "x"));
  EXPECT_TRUE(log.note("", "cuBLASLt linear forward", "y"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "layer res2.conv1: cuDNN convolution forward: no usable algorithm; using the custom kernel");
  EXPECT_EQ(lines[2], "layer (unnamed layer): cuBLASLt linear forward: y; using the custom kernel");
  EXPECT_EQ(log.lines(), 3u);
  // Hints (the vendor path runs, a better algorithm was passed over): once per (layer, op), apart from fallbacks.
  EXPECT_TRUE(log.hint("res2.conv1", "cuDNN convolution forward", "algorithm 1 needs more"));
  EXPECT_FALSE(log.hint("res2.conv1", "cuDNN convolution forward", "algorithm 1 needs more"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[3], "layer res2.conv1: cuDNN convolution forward: algorithm 1 needs more");
  EXPECT_EQ(log.lines(), 4u);
}

TEST(AlgoSelect, ConvImplChoice) {
  EXPECT_EQ(parse_conv_impl("auto"), ConvImpl::kAuto);
  EXPECT_EQ(parse_conv_impl("custom"), ConvImpl::kCustom);
  EXPECT_STREQ(conv_impl_name(parse_conv_impl("cudnn")), "cudnn");
  try {
    parse_conv_impl("fast");
    FAIL() << "accepted 'fast'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("--conv.impl"), std::string::npos);
  }
  EXPECT_TRUE(use_vendor_libraries(ConvImpl::kAuto, true, "cuda"));
  EXPECT_FALSE(use_vendor_libraries(ConvImpl::kAuto, false, "emu"));
  EXPECT_FALSE(use_vendor_libraries(ConvImpl::kCustom, true, "cuda"));
  EXPECT_TRUE(use_vendor_libraries(ConvImpl::kCudnn, true, "cuda"));
  try {
    use_vendor_libraries(ConvImpl::kCudnn, false, "emu");
    FAIL() << "cudnn accepted on the emulator";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("emu device has no cuDNN"), std::string::npos) << e.what();
  }
}

TEST(SyntheticData, SpecAndContents) {
  const SyntheticSpec s = parse_synthetic_spec("300x5x4x3:7");
  EXPECT_EQ(s.count, 300);
  EXPECT_EQ(s.height * s.width * s.channels, 60);
  EXPECT_EQ(s.classes, 7);
  for (const char* bad : {"", "10x5x4:7", "10x5x4x3", "0x5x4x3:7", "10x5x4x3:1", "10x5x4x3:7junk"}) {
    try {
      parse_synthetic_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitUsage);
    }
  }
  auto ds = make_synthetic_dataset(s, 5);
  EXPECT_EQ(ds->info().count, 300);
  std::vector<int64_t> ids{0, 64, 1, 299};
  std::vector<uint8_t> img(4 * 60);
  std::vector<int32_t> lab(4);
  ds->read(ids.data(), 4, img.data(), lab.data());
  EXPECT_TRUE(std::equal(img.begin(), img.begin() + 60, img.begin() + 60));  // sample 64 reuses pool image 0
  EXPECT_FALSE(std::equal(img.begin(), img.begin() + 60, img.begin() + 120));
  EXPECT_EQ(lab[0], lab[1]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lab[i], ds->label(ids[i]));
  int64_t bad_id = 300;
  test::expect_throws([&] { ds->read(&bad_id, 1, img.data(), lab.data()); }, kExitData, "sample 300 out of range");
}

// cuDNN 9 status codes (cudnn_graph.h) by number: this test builds without cuDNN's headers.
TEST(CudnnStatus, ClassifiedByCategoryNotExactCode) {
  EXPECT_EQ(classify_cudnn_status(0), CudnnOutcome::kSuccess);
  for (int unsupported : {2000, 2002, 2005, 2012, 3000, 3001, 3002, 3007, 3014})
    EXPECT_EQ(classify_cudnn_status(unsupported), CudnnOutcome::kUnsupported) << unsupported;
  // 1001 NOT_INITIALIZED, 4000 INTERNAL_ERROR, 4001 ALLOC_FAILED, 5000 EXECUTION_FAILED, 5003 ...
  for (int fatal : {1001, 1002, 4000, 4001, 4003, 5000, 5003, 6000})
    EXPECT_EQ(classify_cudnn_status(fatal), CudnnOutcome::kError) << fatal;
}

TEST(CudnnBnShape, SplitsRowsWithinTheLegacyLimits) {
  CudnnBnShape s;
  ASSERT_TRUE(cudnn_bn_shape(37, true, &s));  // small: N = rows, as cuDNN always saw it
  EXPECT_EQ(s.n, 37);
  EXPECT_EQ(s.h, 1);
  // ResNet-50's first batch norm at batch 256 (256 x 112 x 112 = 3,211,264 rows): past both N limits folded.
  for (bool training : {true, false}) {
    ASSERT_TRUE(cudnn_bn_shape(256 * 112 * 112, training, &s));
    EXPECT_EQ(static_cast<int64_t>(s.n) * s.h, 256 * 112 * 112);
    EXPECT_LE(s.n, training ? kCudnnBnMaxTrainN : kCudnnBnMaxInferN);
    EXPECT_LE(s.h, kCudnnBnMaxH);
  }
  ASSERT_TRUE(cudnn_bn_shape(256 * 112 * 112, false, &s));
  EXPECT_EQ(s.h, 56);  // 49 would leave N = 65,536, one past the inference limit
  ASSERT_TRUE(cudnn_bn_shape(kCudnnBnMaxInferN, false, &s));
  EXPECT_EQ(s.h, 1);
  // A prime number of rows above the limit splits into nothing that fits: the custom kernel runs.
  EXPECT_FALSE(cudnn_bn_shape(65537, false, &s));
  EXPECT_TRUE(cudnn_bn_shape(65537, true, &s));
  EXPECT_FALSE(cudnn_bn_shape(0, true, &s));
}

}  // namespace
}  // namespace cnn
