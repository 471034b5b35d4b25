// The 16-bit tolerance rule of docs/mixed_precision.md on every backend (fast CPU: oneDNN's bf16 kernels, fp16
// through fp32; the CUDA kernels under the emulator's schedules, on both of its GEMM kernels, tensor cores and
// SIMT tiles; a GPU where there is one): for each op with a 16-bit result,
//   |a - ref| <= atol + eps * |ref|,   eps = 2^-8 (bf16), 2^-11 (fp16),
// where ref is the fp32 reference kernel on the same 16-bit inputs before rounding: one rounding of the
// result, plus atol for the fp32 accumulation order. (The sweep compares with the rounded oracle instead and
// so allows two roundings; this suite holds the backends to one.) Inputs are random in [-1, 1], rounded to the
// type; shapes are ragged.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/rng.h"
#include "tests/common/backend_targets.h"
#include "tests/common/half_test_util.h"

namespace cnn::test {
namespace {

ConvDesc conv(int n, int h, int w, int c, int k, int r, int s, int stride, int pad) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = r, d.s = s;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad;
  return d;
}

// 3x3 same with few channels; several 16-deep k tiles with K over one 64-wide N tile; 1x1 stride 2 (oneDNN's
// backward-data primitive rather than the flipped forward); 5x5 stride 3; fmnist_cnn's first layer.
const ConvDesc kConvs[] = {conv(3, 9, 7, 3, 5, 3, 3, 1, 1), conv(2, 10, 11, 21, 70, 3, 3, 1, 1),
                           conv(2, 7, 7, 67, 6, 1, 1, 2, 0), conv(2, 13, 12, 3, 9, 5, 5, 3, 2),
                           conv(2, 28, 28, 1, 16, 3, 3, 1, 1)};

size_t in_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * d.c; }
std::string describe(const ConvDesc& d) {
  return "c" + std::to_string(d.c) + " k" + std::to_string(d.k) + " r" + std::to_string(d.r) + " stride " +
         std::to_string(d.stride_h);
}

class HalfRule : public ::testing::TestWithParam<BackendTarget> {
 protected:
  void SetUp() override {
    tb_ = std::make_unique<TargetBackend>(GetParam());
    if (!tb_->skip_reason().empty()) GTEST_SKIP() << tb_->skip_reason();
    be_ = tb_->get();
    ref_ = make_reference_backend();
  }
  void TearDown() override { tb_.reset(); }
  // The GEMM kernels to run convolution and matmul on: both under the emulator, the backend's own elsewhere.
  std::vector<std::string> gemm_paths() const {
    if (GetParam().kind == TargetKind::kEmu) return {"tensor cores", "simt tiles"};
    return {"default"};
  }
  // A fresh emulated backend with that GEMM kernel (a setting of the backend); called between cases, when
  // nothing is held.
  void select(const std::string& path) {
    if (GetParam().kind != TargetKind::kEmu) return;
    GpuOptions o;
    o.tensor_core_gemm = path == "tensor cores";
    tb_.reset();
    tb_ = std::make_unique<TargetBackend>(GetParam(), o);
    be_ = tb_->get();
  }
  // n values of type t at device pointer d, widened.
  std::vector<float> result(const void* d, size_t n, DType t) {
    std::vector<uint16_t> h(n);
    be_->download(h.data(), d, 2 * n);
    return from_bits(h, t);
  }
  // A device copy of x (already representable in t) in t, and a 16-bit output buffer.
  const void* up(const std::vector<float>& x, DType t) { return hold(x.size(), to_bits(x, t).data()); }
  void* out16(size_t n) { return hold(n, std::vector<uint16_t>(n, 0x7FFF).data()); }  // NaN in bf16 and fp16
  const float* up32(const std::vector<float>& x) {
    void* p = be_->alloc(4 * x.size());
    be_->upload(p, x.data(), 4 * x.size());
    held_.push_back(p);
    return static_cast<const float*>(p);
  }
  uint32_t* mask_out(size_t words) {
    void* p = be_->alloc(sizeof(uint32_t) * words);
    held_.push_back(p);
    return static_cast<uint32_t*>(p);
  }
  void release_all() {
    be_->synchronize();
    for (void* p : held_) be_->release(p);
    held_.clear();
  }

  std::unique_ptr<TargetBackend> tb_;
  Backend* be_ = nullptr;
  std::unique_ptr<Backend> ref_;

 private:
  void* hold(size_t n, const uint16_t* bits) {
    void* p = be_->alloc(2 * n);
    be_->upload(p, bits, 2 * n);
    held_.push_back(p);
    return p;
  }
  std::vector<void*> held_;
};

TEST_P(HalfRule, Convolution) {
  uint64_t seed = 1;
  for (const std::string& path : gemm_paths())
    for (DType t : kHalfTypes)
      for (const ConvDesc& d : kConvs) {
        select(path);
        const auto x = random_rounded(in_size(d), ++seed, t), w = random_rounded(filter_size(d), ++seed, t);
        const auto dy = random_rounded(out_size(d), ++seed, t), b = random_vec(d.k, ++seed);
        std::vector<float> y(out_size(d)), dx(in_size(d));
        ref_->conv2d_forward(DType::kF32, d, x.data(), w.data(), b.data(), y.data());
        ref_->conv2d_backward_data(DType::kF32, d, dy.data(), w.data(), dx.data());
        void *d_y = out16(y.size()), *d_dx = out16(dx.size());
        const void* d_w = up(w, t);
        be_->conv2d_forward(t, d, up(x, t), d_w, up32(b), d_y);
        be_->conv2d_backward_data(t, d, up(dy, t), d_w, d_dx);
        const std::string what = describe(d) + " [" + path + "]";
        EXPECT_TRUE(close16(result(d_y, y.size(), t), y, t, 1e-5, "conv y " + what));
        EXPECT_TRUE(close16(result(d_dx, dx.size(), t), dx, t, 1e-5, "conv dx " + what));
        release_all();
      }
}

TEST_P(HalfRule, Matmul) {
  uint64_t seed = 100;
  struct Mm {
    int m, k, n;
  };
  for (const std::string& path : gemm_paths())
    for (DType t : kHalfTypes)
      for (Mm c : {Mm{5, 7, 3}, Mm{37, 100, 10}, Mm{130, 784, 67}}) {
        select(path);
        const size_t xs = static_cast<size_t>(c.m) * c.k, ws = static_cast<size_t>(c.n) * c.k;
        const size_t ys = static_cast<size_t>(c.m) * c.n;
        const auto x = random_rounded(xs, ++seed, t), w = random_rounded(ws, ++seed, t);
        const auto dy = random_rounded(ys, ++seed, t), b = random_vec(c.n, ++seed);
        std::vector<float> y(ys), dx(xs);
        ref_->linear_forward(DType::kF32, c.m, c.k, c.n, x.data(), w.data(), b.data(), y.data());
        ref_->linear_backward_data(DType::kF32, c.m, c.k, c.n, dy.data(), w.data(), dx.data());
        void *d_y = out16(ys), *d_dx = out16(xs);
        const void* d_w = up(w, t);
        be_->linear_forward(t, c.m, c.k, c.n, up(x, t), d_w, up32(b), d_y);
        be_->linear_backward_data(t, c.m, c.k, c.n, up(dy, t), d_w, d_dx);
        const std::string what = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " [" +
                                 path + "]";
        EXPECT_TRUE(close16(result(d_y, ys, t), y, t, 1e-5, "linear y " + what));
        EXPECT_TRUE(close16(result(d_dx, xs, t), dx, t, 1e-5, "linear dx " + what));
        release_all();
      }
}

// Two layers with filters of the same shape under one parameter version (what Net::forward promises the
// backend): each convolution must use its own filters, also where a backend widens them into scratch that
// sits at the same address for both (the fast CPU backend caches filter layouts per address and version).
TEST_P(HalfRule, SameShapeFiltersUnderOneParamVersion) {
  uint64_t seed = 300;
  for (DType t : kHalfTypes)
    for (const ConvDesc& d : {conv(2, 6, 5, 8, 8, 3, 3, 1, 1), conv(2, 6, 5, 8, 8, 1, 1, 1, 0)}) {
      const auto x = random_rounded(in_size(d), ++seed, t), dy = random_rounded(out_size(d), ++seed, t);
      const void *d_x = up(x, t), *d_dy = up(dy, t);
      be_->set_param_version(12345);
      for (int layer = 0; layer < 2; ++layer) {
        const auto w = random_rounded(filter_size(d), ++seed, t);
        std::vector<float> y(out_size(d)), dx(in_size(d));
        ref_->conv2d_forward(DType::kF32, d, x.data(), w.data(), nullptr, y.data());
        ref_->conv2d_backward_data(DType::kF32, d, dy.data(), w.data(), dx.data());
        void *d_y = out16(y.size()), *d_dx = out16(dx.size());
        const void* d_w = up(w, t);
        be_->conv2d_forward(t, d, d_x, d_w, nullptr, d_y);
        be_->conv2d_backward_data(t, d, d_dy, d_w, d_dx);
        const std::string what = describe(d) + " layer " + std::to_string(layer);
        EXPECT_TRUE(close16(result(d_y, y.size(), t), y, t, 1e-5, "conv y " + what));
        EXPECT_TRUE(close16(result(d_dx, dx.size(), t), dx, t, 1e-5, "conv dx " + what));
      }
      be_->set_param_version(0);
      release_all();
    }
}

TEST_P(HalfRule, BatchNormAndSoftmax) {
  for (DType t : kHalfTypes) {
    for (int rows : {37, 1100})
      for (bool join : {false, true}) {  // join: a residual block's fused y = relu(bn(x) + z) and its backward
        const int c = 45;
        auto x = random_vec(static_cast<size_t>(rows) * c, rows);
        for (size_t i = 0; i < x.size(); ++i) x[i] += 3.f * static_cast<float>(i % c);  // channel means
        x = from_bits(to_bits(x, t), t);
        const auto dy = random_rounded(x.size(), 5, t), z = random_rounded(x.size(), 6, t);
        const auto gamma = random_vec(c, 1), beta = random_vec(c, 2);
        std::vector<float> y(x.size()), dx(x.size()), dz(x.size()), mean(c), invstd(c), rm(c, 0.f), rv(c, 1.f),
            dg(c), db(c);
        std::vector<uint32_t> mask(relu_mask_words(x.size()));
        const float* zp = join ? z.data() : nullptr;
        ref_->batchnorm_forward_train(DType::kF32, rows, c, x.data(), zp, gamma.data(), beta.data(), 1e-5f, 0.1f, join,
                                      y.data(), mask.data(), mean.data(), invstd.data(), rm.data(), rv.data());
        ref_->batchnorm_backward(DType::kF32, rows, c, x.data(), join ? mask.data() : nullptr, dy.data(), gamma.data(),
                                 mean.data(), invstd.data(), dx.data(), join ? dz.data() : nullptr, dg.data(),
                                 db.data());
        void *d_y = out16(x.size()), *d_dx = out16(x.size()), *d_dz = join ? out16(x.size()) : nullptr;
        float* d_stats = const_cast<float*>(up32(std::vector<float>(6 * c, 0.f)));
        uint32_t* d_mask = mask_out(mask.size());
        const void* d_x = up(x, t);
        const float *d_g = up32(gamma), *d_b = up32(beta);
        be_->fill(d_stats + 3 * c, c, 1.f);  // running variance starts at 1
        be_->batchnorm_forward_train(t, rows, c, d_x, join ? up(z, t) : nullptr, d_g, d_b, 1e-5f, 0.1f, join, d_y,
                                     join ? d_mask : nullptr, d_stats, d_stats + c, d_stats + 2 * c, d_stats + 3 * c);
        be_->batchnorm_backward(t, rows, c, d_x, join ? d_mask : nullptr, up(dy, t), d_g, d_stats, d_stats + c, d_dx,
                                d_dz, d_stats + 4 * c, d_stats + 5 * c);
        const std::string what = "rows " + std::to_string(rows) + (join ? " join" : "");
        EXPECT_TRUE(close16(result(d_y, x.size(), t), y, t, 1e-4, "bn y " + what));
        EXPECT_TRUE(close16(result(d_dx, x.size(), t), dx, t, 1e-4, "bn dx " + what));
        if (join) {
          EXPECT_TRUE(close16(result(d_dz, x.size(), t), dz, t, 0, "bn dresidual " + what));
        }
        release_all();
      }
    const int n = 300, classes = 45;
    const auto z = random_rounded(static_cast<size_t>(n) * classes, 9, t, -3.f, 3.f);
    std::vector<int32_t> labels(n);
    CounterRng rng(10, 1);
    for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
    std::vector<float> dz(z.size());
    double loss = 0, got_loss = 0;
    int64_t correct = 0, got_correct = 0;
    const float scale = 65536.f / n;  // fp16 loss scaling's: the gradient carries the scale, the loss does not
    ref_->softmax_xent(DType::kF32, n, classes, z.data(), labels.data(), 0.1f, scale, dz.data(), &loss, &correct);
    void* d_dz = out16(z.size());
    int32_t* d_labels = static_cast<int32_t*>(be_->alloc(4 * n));
    be_->upload(d_labels, labels.data(), 4 * n);
    be_->softmax_xent(t, n, classes, up(z, t), d_labels, 0.1f, scale, d_dz, &got_loss, &got_correct);
    EXPECT_NEAR(got_loss, loss, 1e-5 * loss) << dtype_name(t);
    EXPECT_EQ(got_correct, correct);
    EXPECT_TRUE(close16(result(d_dz, z.size(), t), dz, t, 1e-3, "dlogits"));
    be_->release(d_labels);
    release_all();
  }
}

// Two emulator schedules: the sweep runs all four (cases_half.cpp); this suite adds the tighter rule and the
// second GEMM kernel.
INSTANTIATE_TEST_SUITE_P(Backends, HalfRule, ::testing::ValuesIn(backend_targets(2)), target_param_name);

// The launcher behind the cuDNN filter gradient's 16-bit scratch joining the fp32 gradient (kernels/cuda/vendor/cudnn_conv.cu),
// under the emulator: dw += widened scratch, exactly.
TEST(HalfRuleLaunchers, AddWidenedJoinsAnFp32Accumulator) {
  for (DType t : kHalfTypes) {
    const size_t n = 70001;
    const auto part = random_rounded(n, 1, t), acc = random_vec(n, 2);
    const auto bits = to_bits(part, t);
    void *d_part = nullptr, *d_acc = nullptr;
    ASSERT_EQ(cudaMalloc(&d_part, 2 * n), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_acc, 4 * n), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_part, bits.data(), 2 * n, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_acc, acc.data(), 4 * n, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(emu::add_widened_cuda(t, n, d_part, static_cast<float*>(d_acc), nullptr), cudaSuccess);
    std::vector<float> got(n), want(n);
    ASSERT_EQ(cudaMemcpy(got.data(), d_acc, 4 * n, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) want[i] = acc[i] + part[i];
    EXPECT_TRUE(all_close(got, want, 0, 0, std::string("add_widened ") + dtype_name(t)));
    cudaFree(d_part);
    cudaFree(d_acc);
  }
}

// Where the CPU has the instructions, bf16 convolution must run on oneDNN's native bf16 kernels, not fp32
// kernels between conversions (which the numeric tests cannot tell apart).
TEST(HalfRuleNative, CpuBf16ConvolutionRunsOnBf16Instructions) {
  const std::string missing = dnnl_bf16_unsupported();
  if (!missing.empty()) GTEST_SKIP() << "no native bf16 on this machine: " << missing;
  DnnlOps ops(1);
  const std::string impl = ops.conv_impl(conv(2, 8, 8, 64, 64, 3, 3, 1, 1), DType::kBF16);
  EXPECT_NE(impl.find("bf16"), std::string::npos) << "oneDNN chose " << impl;
  EXPECT_EQ(impl.find("ref"), std::string::npos) << "oneDNN fell back to its reference kernels: " << impl;
}

}  // namespace
}  // namespace cnn::test
