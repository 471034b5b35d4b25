// The fast CPU backend's batch norm and axpy on bf16 tensors (kernels/cpu/batchnorm_fast.cpp, fast_cpu.cpp: no
// conversion passes) give the bits of the mixed-precision rule they replace: widen the inputs, run the fp32 kernels, round each 16-bit
// output once (docs/mixed_precision.md). Batch norm: every output, the ReLU mask and the fp32 statistics and
// gradients, bit for bit, on ragged shapes (the kernels' scalar tails), with NaNs (one signalling) among the inputs.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = from_float<Bf16>(v[i]);
  return r;
}
std::vector<float> widen(const std::vector<Bf16>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = to_float(v[i]);
  return r;
}
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

// One forward (training and inference) and backward, with the 16-bit tensors given as bf16 (`native`) or
// widened to fp32 and the outputs rounded afterwards.
struct Out {
  std::vector<Bf16> y, y_infer, dx, dres;
  std::vector<float> mean, invstd, rmean, rvar, dgamma, dbeta;
  std::vector<uint32_t> mask;
};

Out run(Backend& be, bool native, int rows, int c, bool residual, bool relu, uint64_t seed) {
  const size_t n = static_cast<size_t>(rows) * c;
  auto xs = random_vec(n, seed, -3.f, 5.f), zs = random_vec(n, seed + 1), dys = random_vec(n, seed + 2);
  xs[n / 2] = std::numeric_limits<float>::quiet_NaN();  // its channel's statistics and outputs become NaN
  const std::vector<Bf16> x = to_bf16(xs), z = to_bf16(zs);
  std::vector<Bf16> dy = to_bf16(dys);
  dy[n / 3].bits = 0x7F81;  // a signalling NaN: copied into dresidual untouched, quieted on the way out
  dy[n / 3 + 1].bits = 0xFFFF;
  const auto gamma = random_vec(c, seed + 3, 0.5f, 1.5f), beta = random_vec(c, seed + 4);
  Out o;
  o.rmean = random_vec(c, seed + 5);
  o.rvar = random_vec(c, seed + 6, 0.5f, 2.f);
  o.dgamma = random_vec(c, seed + 7);
  o.dbeta = random_vec(c, seed + 8);
  o.mean.resize(c);
  o.invstd.resize(c);
  o.mask.assign(relu_mask_words(n), 0u);
  std::vector<float> y(n), yi(n), dx(n), dres(n);
  o.y.resize(n), o.y_infer.resize(n), o.dx.resize(n), o.dres.resize(n);
  const DType t = native ? DType::kBF16 : DType::kF32;
  const std::vector<float> xw = widen(x), zw = widen(z), dyw = widen(dy);
  const void* px = native ? static_cast<const void*>(x.data()) : xw.data();
  const void* pz = !residual ? nullptr : native ? static_cast<const void*>(z.data()) : zw.data();
  const void* pdy = native ? static_cast<const void*>(dy.data()) : dyw.data();
  void* py = native ? static_cast<void*>(o.y.data()) : y.data();
  void* pyi = native ? static_cast<void*>(o.y_infer.data()) : yi.data();
  void* pdx = native ? static_cast<void*>(o.dx.data()) : dx.data();
  void* pdres = !residual ? nullptr : native ? static_cast<void*>(o.dres.data()) : dres.data();
  be.batchnorm_forward_infer(t, rows, c, px, pz, gamma.data(), beta.data(), o.rmean.data(), o.rvar.data(), 1e-5f,
                             relu, pyi);
  be.batchnorm_forward_train(t, rows, c, px, pz, gamma.data(), beta.data(), 1e-5f, 0.1f, relu, py, o.mask.data(),
                             o.mean.data(), o.invstd.data(), o.rmean.data(), o.rvar.data());
  be.batchnorm_backward(t, rows, c, px, relu ? o.mask.data() : nullptr, pdy, gamma.data(), o.mean.data(),
                        o.invstd.data(), pdx, pdres, o.dgamma.data(), o.dbeta.data());
  if (!native) o.y = to_bf16(y), o.y_infer = to_bf16(yi), o.dx = to_bf16(dx), o.dres = to_bf16(dres);
  return o;
}

TEST(FastBf16, BatchNormSameBitsAsWideningTheFp32Kernels) {
  auto be = make_cpu_backend(2, CpuKernels::kFast);
  const int shapes[][2] = {{7, 3}, {37, 16}, {1100, 45}, {2048, 17}, {9000, 64}, {65, 2048}};
  uint64_t seed = 40;
  for (const auto& s : shapes)
    for (bool residual : {false, true})
      for (bool relu : {false, true}) {
        seed += 10;
        const std::string what = "rows " + std::to_string(s[0]) + " c " + std::to_string(s[1]) +
                                 (residual ? " +residual" : "") + (relu ? " +relu" : "");
        const Out a = run(*be, true, s[0], s[1], residual, relu, seed);
        const Out b = run(*be, false, s[0], s[1], residual, relu, seed);
        EXPECT_TRUE(same_bits(a.y, b.y)) << what << ": y";
        EXPECT_TRUE(same_bits(a.y_infer, b.y_infer)) << what << ": inference y";
        EXPECT_TRUE(same_bits(a.dx, b.dx)) << what << ": dx";
        EXPECT_TRUE(same_bits(a.dres, b.dres)) << what << ": dresidual";
        EXPECT_TRUE(same_bits(a.mask, b.mask)) << what << ": ReLU mask";
        for (auto [p, q, name] : {std::tuple{&a.mean, &b.mean, "mean"}, {&a.invstd, &b.invstd, "invstd"},
                                  {&a.rmean, &b.rmean, "running mean"}, {&a.rvar, &b.rvar, "running var"},
                                  {&a.dgamma, &b.dgamma, "dgamma"}, {&a.dbeta, &b.dbeta, "dbeta"}})
          EXPECT_TRUE(same_bits(*p, *q)) << what << ": " << name;
      }
}

// The vector rounding against the scalar conversion where rounding is delicate: ties to even both ways, the
// largest finite values (rounding up to infinity), infinities, subnormals, signed zeros and NaNs with payloads
// (all ones: rounding it as a number would carry into the sign).
// Inference with unit statistics (variance 1, eps 0, mean 0, beta 0) on inputs of 1 makes y = gamma exactly,
// so each channel's gamma is what the kernel rounds; two rows of 16 channels run the 8-lane path.
TEST(FastBf16, BatchNormStoresRoundAsTheScalarConversion) {
  const uint32_t bits[16] = {0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u,
                             0xFF800000u, 0x00000001u, 0x80008000u, 0x7FC00001u, 0x7F800001u, 0xFFFFFFFFu,
                             0x00000000u, 0x80000000u, 0x3F7FFF80u, 0x477F8000u};
  const int c = 16, rows = 2;
  std::vector<float> gamma(c), zero(c, 0.f), var(c, 1.f), y(rows * c);
  std::memcpy(gamma.data(), bits, sizeof(bits));
  const std::vector<Bf16> x = to_bf16(std::vector<float>(rows * c, 1.f));
  const std::vector<float> xw = widen(x);
  std::vector<Bf16> yb(rows * c);
  auto be = make_cpu_backend(1, CpuKernels::kFast);
  be->batchnorm_forward_infer(DType::kF32, rows, c, xw.data(), nullptr, gamma.data(), zero.data(), zero.data(),
                              var.data(), 0.f, false, y.data());
  be->batchnorm_forward_infer(DType::kBF16, rows, c, x.data(), nullptr, gamma.data(), zero.data(), zero.data(),
                              var.data(), 0.f, false, yb.data());
  const std::vector<Bf16> want = to_bf16(y);
  for (int i = 0; i < rows * c; ++i)
    EXPECT_EQ(yb[i].bits, want[i].bits) << "gamma bits 0x" << std::hex << bits[i % c];
}

// y += alpha x on bf16: the fp32 kernel on the widened values, rounded once; odd lengths (the parallel split's
// tails), a NaN and sums that overflow to infinity.
TEST(FastBf16, AxpySameBitsAsWideningTheFp32Kernel) {
  auto be = make_cpu_backend(2, CpuKernels::kFast);
  for (size_t n : {size_t{1}, size_t{37}, size_t{100003}}) {
    auto xs = random_vec(n, n, -2.f, 2.f), ys = random_vec(n, n + 1, -2.f, 2.f);
    xs[0] = n > 1 ? std::numeric_limits<float>::quiet_NaN() : 3e38f;
    ys[n - 1] = 3.3e38f;
    const std::vector<Bf16> x = to_bf16(xs), y0 = to_bf16(ys);
    for (float alpha : {1.f, -0.37f, 3.f}) {
      std::vector<Bf16> y = y0;
      be->axpy(DType::kBF16, n, alpha, x.data(), y.data());
      const std::vector<float> xw = widen(x);
      std::vector<float> yw = widen(y0);
      be->axpy(DType::kF32, n, alpha, xw.data(), yw.data());
      EXPECT_TRUE(same_bits(y, to_bf16(yw))) << "n " << n << " alpha " << alpha;
    }
  }
}

}  // namespace
}  // namespace cnn
