// The fast CPU backend's batch norm (kernels/cpu/batchnorm_fast.cpp) against the reference kernels, with and
// without the fused residual add and ReLU, on ragged row and channel counts and several thread counts;
// results must not depend on the thread count (chunked reductions added in a fixed order).
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;

struct Shape {
  int rows, c;
};
// Channel counts off every vector width, tails of every length, a chunked (parallel) and a wide-channel case.
const Shape kShapes[] = {{1, 1}, {7, 3}, {37, 16}, {1100, 45}, {2048, 17}, {9000, 64}, {300, 130}, {65, 2048}};

// Everything one forward+backward produces, for comparisons.
struct BnRun {
  std::vector<float> y, mean, invstd, rmean, rvar, dx, dres, dgamma, dbeta, y_infer;
  std::vector<uint32_t> mask_words;
  std::vector<bool> mask;
};

// The backward runs with `mask` when given (the fused ReLU's mask of another backend: two implementations
// may round an element that lands on 0 differently), else with this forward's own.
BnRun run_bn(Backend& be, const Shape& s, bool residual, BnAct act, bool want_dx, uint64_t seed,
             const std::vector<uint32_t>* mask = nullptr) {
  const size_t n = static_cast<size_t>(s.rows) * s.c;
  // A large common offset checks the variance's precision (the one-pass form loses it without a shift).
  auto x = random_vec(n, seed, 99.f, 101.f), res = random_vec(n, seed + 1), dy = random_vec(n, seed + 2);
  auto gamma = random_vec(s.c, seed + 3, 0.5f, 1.5f), beta = random_vec(s.c, seed + 4);
  BnRun r;
  r.rmean = random_vec(s.c, seed + 5);
  r.rvar = random_vec(s.c, seed + 6, 0.5f, 2.f);
  r.dgamma = random_vec(s.c, seed + 7);
  r.dbeta = random_vec(s.c, seed + 8);
  r.y.assign(n, 7.f);
  r.y_infer.assign(n, 7.f);
  r.mean.resize(s.c);
  r.invstd.resize(s.c);
  r.dx.assign(n, 7.f);
  r.dres.assign(n, 7.f);
  r.mask_words.assign(relu_mask_words(n), 0x5a5a5a5au);
  const float* z = residual ? res.data() : nullptr;
  be.batchnorm_forward_infer(DType::kF32, s.rows, s.c, x.data(), z, gamma.data(), beta.data(), r.rmean.data(),
                             r.rvar.data(), 1e-5f, act, r.y_infer.data());
  be.batchnorm_forward_train(DType::kF32, s.rows, s.c, x.data(), z, gamma.data(), beta.data(), 1e-5f, 0.1f, act,
                             r.y.data(), r.mask_words.data(), r.mean.data(), r.invstd.data(), r.rmean.data(),
                             r.rvar.data());
  const uint32_t* m = mask ? mask->data() : r.mask_words.data();
  be.batchnorm_backward(DType::kF32, s.rows, s.c, x.data(), act.relu ? m : nullptr, dy.data(), gamma.data(),
                        r.mean.data(), r.invstd.data(), want_dx ? r.dx.data() : nullptr,
                        residual ? r.dres.data() : nullptr, r.dgamma.data(), r.dbeta.data());
  if (act.relu)
    for (size_t i = 0; i < n; ++i) r.mask.push_back(r.mask_words[i / 32] >> (i % 32) & 1u);
  return r;
}

class FastBatchNorm : public ::testing::TestWithParam<int> {};

TEST_P(FastBatchNorm, MatchesReference) {
  auto fast = make_cpu_backend(GetParam(), CpuKernels::kFast);
  auto ref = make_cpu_backend(1, CpuKernels::kReference);
  uint64_t seed = 10;
  for (const Shape& s : kShapes)
    for (bool residual : {false, true})
      for (const BnAct act : {BnAct(false), BnAct(true), BnAct::relu_capped(0.5f)}) {
        const bool want_dx = s.rows != 7;  // dx may be null
        seed += 10;
        const std::string what = "rows " + std::to_string(s.rows) + " c " + std::to_string(s.c) +
                                 (residual ? " +residual" : "") +
                                 (act.capped ? " +relu capped" : act.relu ? " +relu" : "");
        BnRun b = run_bn(*ref, s, residual, act, want_dx, seed);
        BnRun a = run_bn(*fast, s, residual, act, want_dx, seed, &b.mask_words);
        EXPECT_TRUE(all_close(a.y_infer, b.y_infer, 1e-5, 1e-5, what + " infer y"));
        EXPECT_TRUE(all_close(a.mean, b.mean, 1e-5, 1e-6, what + " mean"));
        EXPECT_TRUE(all_close(a.invstd, b.invstd, 1e-5, 1e-4, what + " invstd"));
        EXPECT_TRUE(all_close(a.rmean, b.rmean, 1e-5, 1e-6, what + " running mean"));
        EXPECT_TRUE(all_close(a.rvar, b.rvar, 1e-5, 1e-4, what + " running var"));
        EXPECT_TRUE(all_close(a.y, b.y, 1e-4, 1e-4, what + " y"));
        // The masks agree except where y is within rounding of 0 or of the cap (the two compute bn(x)
        // differently); the backward ran with the reference's mask.
        size_t differ = 0;
        for (size_t i = 0; i < a.mask.size(); ++i)
          differ += a.mask[i] != b.mask[i] && std::fabs(b.y[i]) > 1e-4f && !(act.capped && b.y[i] > act.cap - 1e-4f);
        EXPECT_EQ(differ, 0u) << what << " mask";
        EXPECT_TRUE(all_close(a.dgamma, b.dgamma, 1e-3, 1e-4, what + " dgamma"));
        EXPECT_TRUE(all_close(a.dbeta, b.dbeta, 1e-3, 1e-4, what + " dbeta"));
        EXPECT_TRUE(all_close(a.dx, b.dx, 1e-3, 1e-3, what + " dx"));
        EXPECT_TRUE(all_close(a.dres, b.dres, 0, 0, what + " dresidual"));
      }
}

// Any thread count gives the bits of one thread.
TEST_P(FastBatchNorm, SameBitsForAnyThreadCount) {
  auto one = make_cpu_backend(1, CpuKernels::kFast), many = make_cpu_backend(GetParam(), CpuKernels::kFast);
  for (const Shape& s : kShapes) {
    BnRun a = run_bn(*one, s, true, true, true, 3), b = run_bn(*many, s, true, true, true, 3);
    const std::string what = "rows " + std::to_string(s.rows) + " c " + std::to_string(s.c);
    for (auto [x, y, name] : {std::tuple{&a.y, &b.y, "y"}, {&a.mean, &b.mean, "mean"}, {&a.invstd, &b.invstd, "invstd"},
                              {&a.dx, &b.dx, "dx"}, {&a.dgamma, &b.dgamma, "dgamma"}, {&a.dbeta, &b.dbeta, "dbeta"}})
      EXPECT_EQ(0, std::memcmp(x->data(), y->data(), sizeof(float) * x->size())) << what << " " << name;
    EXPECT_EQ(a.mask, b.mask) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, FastBatchNorm, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace cnn
