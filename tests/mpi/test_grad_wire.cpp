// The 16-bit gradient wire (--comm.grad_dtype bf16|fp16, kernels/collectives.h): each rank's fp32 gradient
// is rounded to 16 bits, summed in 16 bits (every addition in fp32, rounded) and widened back into the fp32
// buffer. Checked through MPI on host memory and through the NCCL code path under the emulator (which
// test-mpi-nccl also runs with deferred emulator streams, where a conversion not ordered before its bucket's
// collective would send stale data): exact where every partial sum is representable; a value 16 bits cannot
// hold is summed as its rounding; random gradients within the bound of W roundings; the same bits on every
// rank and through both paths; an fp16 sum past 65504 is inf (the loss scaler or the non-finite check then
// acts on it).
#include <cmath>
#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "tests/common/test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace cnn {
namespace {

// This rank's `x` summed over the ranks through a GradSync of `coll` with wire `w`, in buckets of 100
// elements of which all but the first are launched during "backward". `be`: the backend whose memory
// `coll` works on (null: host memory).
std::vector<float> sum_with(Collectives& coll, Backend* be, GradWire w, std::vector<float> x) {
  const size_t n = x.size();
  float* buf = x.data();
  if (be) {
    buf = static_cast<float*>(be->alloc(n * sizeof(float)));
    be->upload(buf, x.data(), n * sizeof(float));
  }
  {
    GradSyncOptions o;
    o.bucket_bytes = 100 * sizeof(float);
    o.wire = w;
    auto sync = coll.make_grad_sync(buf, n, o);
    for (size_t b = 0; b + 1 < sync->num_buckets(); ++b) sync->on_ready(sync->bucket_begin(b));
    EXPECT_EQ(sync->counters().launched_in_backward, static_cast<int64_t>(sync->num_buckets()) - 1);
    sync->finish();
  }
  if (be) {
    be->download(x.data(), buf, n * sizeof(float));
    be->release(buf);
  }
  return x;
}

struct WireCase {
  bool emu;  // the NCCL path under the emulator, else MPI on host memory
  GradWire wire;
};

std::string case_name(const ::testing::TestParamInfo<WireCase>& p) {
  return std::string(p.param.emu ? "NcclEmu_" : "Mpi_") + (p.param.wire == GradWire::kBF16 ? "bf16" : "fp16");
}

class GradWire16 : public ::testing::TestWithParam<WireCase> {
 protected:
  void SetUp() override {
    mpi_ = make_mpi_collectives();
    if (GetParam().emu) {
      emu_ = make_emu_backend();
      nccl_ = make_emu_collectives(*emu_);
    }
  }
  std::vector<float> sum(const std::vector<float>& x, GradWire w) {
    return GetParam().emu ? sum_with(*nccl_, emu_.get(), w, x) : sum_with(*mpi_, nullptr, w, x);
  }
  double unit_roundoff() const { return GetParam().wire == GradWire::kBF16 ? 1.0 / 256 : 1.0 / 2048; }

  std::unique_ptr<Collectives> mpi_;
  std::unique_ptr<Backend> emu_;
  std::unique_ptr<Collectives> nccl_;
};

TEST_P(GradWire16, ExactWhereEveryPartialSumIsRepresentable) {
  const int r = world_rank(), w = world_size();
  std::vector<float> x(1003);  // 11 buckets, the last one short
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) + r;  // sums stay below 2^8
  const std::vector<float> s = sum(x, GetParam().wire);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(s[i], static_cast<float>(w * (i % 17) + w * (w - 1) / 2)) << "element " << i;
}

TEST_P(GradWire16, SumsTheRoundedGradient) {
  // 1 + 2^-12 has no bf16 or fp16 representation: it travels as 1, so the sum is exactly the rank count,
  // where the fp32 wire keeps the 2^-12 of every rank.
  const float v = 1.0f + 1.0f / 4096;
  const std::vector<float> x(250, v);
  const std::vector<float> s16 = sum(x, GetParam().wire), s32 = sum(x, GradWire::kF32);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(s16[i], static_cast<float>(world_size())) << "element " << i;
    ASSERT_EQ(s32[i], world_size() * v) << "element " << i;
  }
}

TEST_P(GradWire16, RandomGradientsWithinTheBoundAndIdenticalEverywhere) {
  const int w = world_size();
  const size_t n = 4099;
  std::vector<std::vector<float>> all;  // every rank's gradient, to compute the exact sum here
  for (int q = 0; q < w; ++q) {
    all.push_back(test::random_vec(n, 700 + q));
    // Magnitudes from 1e-3 to 1 and a few exact zeros, as gradients have.
    for (size_t i = 0; i < n; ++i) all[q][i] *= (i % 7 == 3) ? 0.f : std::pow(10.f, -static_cast<float>(i % 4));
  }
  const std::vector<float> s = sum(all[world_rank()], GetParam().wire);
  // Each term is rounded once on the way in and once per addition it takes part in: at most w roundings.
  const double u = unit_roundoff(), gamma = w * u / (1 - w * u);
  for (size_t i = 0; i < n; ++i) {
    double exact = 0, mag = 0;
    for (int q = 0; q < w; ++q) {
      exact += all[q][i];
      mag += std::fabs(all[q][i]);
    }
    ASSERT_LE(std::fabs(s[i] - exact), gamma * mag + w * 0x1p-24) << "element " << i << ": " << s[i] << " vs " << exact;
  }
  test::expect_same_on_every_rank(s, "16-bit sum");
  if (GetParam().emu) {  // the emulated NCCL reduces as MPI does: the same bits through both paths
    const std::vector<float> m = sum_with(*mpi_, nullptr, GetParam().wire, all[world_rank()]);
    EXPECT_EQ(std::memcmp(m.data(), s.data(), n * sizeof(float)), 0) << "NCCL (emulated) and MPI paths differ";
  }
}

TEST_P(GradWire16, Fp16OverflowIsInfBf16IsNot) {
  const std::vector<float> x(130, 40000.f);  // w * 40000 > 65504 for every w >= 2
  const std::vector<float> s = sum(x, GetParam().wire);
  for (size_t i = 0; i < x.size(); ++i) {
    if (GetParam().wire == GradWire::kF16)
      ASSERT_TRUE(std::isinf(s[i]) && s[i] > 0) << "element " << i << ": " << s[i];
    else
      ASSERT_NEAR(s[i], 40000.0 * world_size(), 40000.0 * world_size() * unit_roundoff() * world_size());
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, GradWire16,
                         ::testing::Values(WireCase{false, GradWire::kBF16}, WireCase{false, GradWire::kF16},
                                           WireCase{true, GradWire::kBF16}, WireCase{true, GradWire::kF16}),
                         case_name);

}  // namespace
}  // namespace cnn
