// GPU only: the custom implicit-GEMM kernels against cuDNN on ResNet-50's convolution shapes (batch 32):
// results agree (TF32 off), and the time of each direction is printed with the custom kernels' share of
// cuDNN's rate (run-gpu-checks.sh puts the table in its report). Skips without a GPU (fails under
// CNNTRAIN_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

struct Shape {
  const char* name;
  int h, c, k, r, stride;
};
// Every distinct convolution of torchvision's ResNet-50 v1.5 (input size h, in/out channels, kernel, stride).
const Shape kResNet50[] = {
    {"conv1 7x7/2", 224, 3, 64, 7, 2},       {"l1 1x1 64>64", 56, 64, 64, 1, 1},
    {"l1 3x3 64", 56, 64, 64, 3, 1},         {"l1 1x1 64>256", 56, 64, 256, 1, 1},
    {"l1 1x1 256>64", 56, 256, 64, 1, 1},    {"l2 1x1 256>128", 56, 256, 128, 1, 1},
    {"l2 3x3/2 128", 56, 128, 128, 3, 2},    {"l2 3x3 128", 28, 128, 128, 3, 1},
    {"l2 1x1 128>512", 28, 128, 512, 1, 1},  {"l2 1x1 512>128", 28, 512, 128, 1, 1},
    {"l3 3x3/2 256", 28, 256, 256, 3, 2},    {"l3 3x3 256", 14, 256, 256, 3, 1},
    {"l3 1x1 256>1024", 14, 256, 1024, 1, 1}, {"l3 1x1 1024>256", 14, 1024, 256, 1, 1},
    {"l4 3x3/2 512", 14, 512, 512, 3, 2},    {"l4 3x3 512", 7, 512, 512, 3, 1},
    {"l4 1x1 512>2048", 7, 512, 2048, 1, 1}, {"l4 1x1 2048>512", 7, 2048, 512, 1, 1},
};

// Device copies of host vectors on one backend, released with the holder.
class Buffers {
 public:
  explicit Buffers(Backend& be) : be_(be) {}
  ~Buffers() {
    for (void* p : held_) be_.release(p);
  }
  float* upload(const std::vector<float>& h) {
    float* d = zeros(h.size());
    be_.upload(d, h.data(), sizeof(float) * h.size());
    return d;
  }
  float* zeros(size_t n) {
    held_.push_back(be_.alloc(sizeof(float) * n));
    be_.fill(static_cast<float*>(held_.back()), n, 0.f);
    return static_cast<float*>(held_.back());
  }
  std::vector<float> download(const float* d, size_t n) {
    std::vector<float> h(n);
    be_.download(h.data(), d, sizeof(float) * n);
    return h;
  }

 private:
  Backend& be_;
  std::vector<void*> held_;
};

// Milliseconds per call of f, after one warm-up call (algorithm choice, plan creation).
template <class F>
double time_ms(Backend& be, F f) {
  f();
  be.synchronize();
  const int reps = 5;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  be.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

TEST(VendorSpeed, ResNet50LayersCustomVsCudnn) {
  std::string reason;
  auto custom = make_gpu_test_backend(false, &reason);
  if (!custom) {
    if (gpu_required()) FAIL() << "CNNTRAIN_REQUIRE_GPU=1: " << reason;
    GTEST_SKIP() << reason;
  }
  auto vendor = make_gpu_test_backend(true, &reason);
  ASSERT_TRUE(vendor) << reason;
  std::printf("%-18s %9s %9s %6s %9s %9s %6s %9s %9s %6s\n", "layer (batch 32)", "fwd cust", "cudnn", "%", "bwdD cust",
              "cudnn", "%", "bwdF cust", "cudnn", "%");
  uint64_t seed = 5;
  for (const Shape& s : kResNet50) {
    ConvDesc d;
    d.n = 32, d.h = d.w = s.h, d.c = s.c, d.k = s.k, d.r = d.s = s.r, d.stride_h = d.stride_w = s.stride;
    d.pad_h = d.pad_w = s.r / 2;
    const size_t xs = static_cast<size_t>(d.n) * d.h * d.w * d.c, ys = static_cast<size_t>(d.n) * d.p() * d.q() * d.k,
                 ws = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    const auto x = random_vec(xs, ++seed), w = random_vec(ws, ++seed), dy = random_vec(ys, ++seed);
    double t[2][3];
    std::vector<float> out[2][3];
    Backend* bes[2] = {custom.get(), vendor.get()};
    for (int v = 0; v < 2; ++v) {
      Backend& be = *bes[v];
      Buffers dev(be);
      const float *d_x = dev.upload(x), *d_w = dev.upload(w), *d_dy = dev.upload(dy);
      float *d_y = dev.zeros(ys), *d_dx = dev.zeros(xs), *d_dw = dev.zeros(ws);
      t[v][0] = time_ms(be, [&] { be.conv2d_forward(DType::kF32, d, d_x, d_w, nullptr, d_y); });
      t[v][1] = time_ms(be, [&] { be.conv2d_backward_data(DType::kF32, d, d_dy, d_w, d_dx); });
      be.fill(d_dw, ws, 0.f);
      be.conv2d_backward_filter(DType::kF32, d, d_x, d_dy, d_dw, nullptr);  // once, for the comparison (it accumulates)
      out[v][0] = dev.download(d_y, ys);
      out[v][1] = dev.download(d_dx, xs);
      out[v][2] = dev.download(d_dw, ws);
      t[v][2] = time_ms(be, [&] { be.conv2d_backward_filter(DType::kF32, d, d_x, d_dy, d_dw, nullptr); });
    }
    const char* what[3] = {"forward", "backward-data", "backward-filter"};
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(all_close(out[0][i], out[1][i], 1e-3, 1e-3, std::string(s.name) + " " + what[i] + " custom vs cuDNN"));
    std::printf("%-18s %9.3f %9.3f %5.0f%% %9.3f %9.3f %5.0f%% %9.3f %9.3f %5.0f%%\n", s.name, t[0][0], t[1][0],
                100 * t[1][0] / t[0][0], t[0][1], t[1][1], 100 * t[1][1] / t[0][1], t[0][2], t[1][2],
                100 * t[1][2] / t[0][2]);
  }
  std::printf("(ms per call; %% = the custom kernel's rate as a share of cuDNN's)\n");
}

}  // namespace
}  // namespace cnn::test
