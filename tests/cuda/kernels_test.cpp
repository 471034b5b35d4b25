// Every custom CUDA kernel, run by the SIMT emulator through the emulated CudaBackend (and on a real GPU
// where there is one), against the CPU reference backend on random inputs in [-1, 1]. Shapes are ragged (not
// multiples of the 64x64x16 GEMM tiles, the 256-thread blocks or the 32-lane warps) and some are long enough
// to take the split-K path and to make grid-stride loops wrap. Each test runs under the default schedule and
// three seeded reorderings.
#include <algorithm>

#include "kernels/backend.h"
#include "tests/cuda/cuda_test_util.h"

namespace cnn::test {
namespace {

using Kernels = DeviceTest;

size_t in_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * d.c; }

ConvDesc conv(int n, int h, int w, int c, int k, int r, int s, int stride_h, int stride_w, int pad_h, int pad_w) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = r, d.s = s;
  d.stride_h = stride_h, d.stride_w = stride_w, d.pad_h = pad_h, d.pad_w = pad_w;
  return d;
}

// 3x3 same; K over one N tile; 1x1 stride 2 with RSC over one K tile; asymmetric 3x2 with padding;
// 5x5 stride 3 pad 2; and a long batch*P*Q reduction that splits the filter gradient's K dimension.
const ConvDesc kConvCases[] = {
    conv(3, 9, 7, 3, 5, 3, 3, 1, 1, 1, 1),   conv(2, 11, 10, 5, 70, 3, 2, 2, 1, 1, 0),
    conv(2, 7, 7, 67, 6, 1, 1, 2, 2, 0, 0),  conv(2, 13, 12, 3, 9, 5, 5, 3, 3, 2, 2),
    conv(5, 12, 12, 2, 7, 3, 3, 1, 1, 1, 1),
};

TEST_P(Kernels, Conv2dForward) {
  uint64_t seed = 1;
  for (const ConvDesc& d : kConvCases)
    for (bool bias : {true, false}) {
      auto x = random_vec(in_size(d), ++seed), w = random_vec(filter_size(d), ++seed), b = random_vec(d.k, ++seed);
      std::vector<float> want(out_size(d));
      cpu_->conv2d_forward(d, x.data(), w.data(), bias ? b.data() : nullptr, want.data());
      DeviceBuffers dev(*dev_);
      float* d_y = dev.zeros(want.size());
      dev_->conv2d_forward(d, dev.upload(x), dev.upload(w), bias ? dev.upload(b) : nullptr, d_y);
      EXPECT_TRUE(all_close(dev.download(d_y, want.size()), want, 1e-5, 1e-4, "conv forward")) << "case c=" << d.c
          << " k=" << d.k << " r=" << d.r << " bias=" << bias;
    }
}

TEST_P(Kernels, Conv2dBackwardData) {
  uint64_t seed = 100;
  for (const ConvDesc& d : kConvCases) {
    auto dy = random_vec(out_size(d), ++seed), w = random_vec(filter_size(d), ++seed);
    std::vector<float> want(in_size(d));
    cpu_->conv2d_backward_data(d, dy.data(), w.data(), want.data());
    DeviceBuffers dev(*dev_);
    float* d_dx = dev.upload(random_vec(want.size(), ++seed));  // overwritten, not accumulated
    dev_->conv2d_backward_data(d, dev.upload(dy), dev.upload(w), d_dx);
    EXPECT_TRUE(all_close(dev.download(d_dx, want.size()), want, 1e-5, 1e-4, "conv backward data"))
        << "case c=" << d.c << " k=" << d.k << " r=" << d.r << " stride=" << d.stride_h;
  }
}

TEST_P(Kernels, Conv2dBackwardFilterAccumulates) {
  uint64_t seed = 200;
  for (const ConvDesc& d : kConvCases)
    for (bool bias : {true, false}) {
      auto x = random_vec(in_size(d), ++seed), dy = random_vec(out_size(d), ++seed);
      auto dw = random_vec(filter_size(d), ++seed), db = random_vec(d.k, ++seed);  // += onto existing values
      DeviceBuffers dev(*dev_);
      float* d_dw = dev.upload(dw);
      float* d_db = dev.upload(db);
      cpu_->conv2d_backward_filter(d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      dev_->conv2d_backward_filter(d, dev.upload(x), dev.upload(dy), d_dw, bias ? d_db : nullptr);
      EXPECT_TRUE(all_close(dev.download(d_dw, dw.size()), dw, 1e-4, 1e-4, "conv dw")) << "case c=" << d.c
          << " k=" << d.k << " n*p*q=" << d.n * d.p() * d.q();
      EXPECT_TRUE(all_close(dev.download(d_db, db.size()), db, 1e-4, 1e-4, "conv db"));
    }
}

struct LinearCase {
  int m, k, n;
};
// Ragged everything; n over one tile; a batch long enough to split the weight gradient's reduction.
const LinearCase kLinearCases[] = {{37, 70, 13}, {5, 200, 66}, {130, 17, 3}, {1, 1, 1}};

TEST_P(Kernels, LinearForwardAndBackward) {
  uint64_t seed = 300;
  for (const LinearCase& c : kLinearCases)
    for (bool bias : {true, false}) {
      const size_t xs = static_cast<size_t>(c.m) * c.k, ws = static_cast<size_t>(c.n) * c.k,
                   ys = static_cast<size_t>(c.m) * c.n;
      auto x = random_vec(xs, ++seed), w = random_vec(ws, ++seed), b = random_vec(c.n, ++seed);
      auto dy = random_vec(ys, ++seed), dw = random_vec(ws, ++seed), db = random_vec(c.n, ++seed);
      DeviceBuffers dev(*dev_);
      float *d_x = dev.upload(x), *d_w = dev.upload(w), *d_dy = dev.upload(dy);
      float *d_dw = dev.upload(dw), *d_db = dev.upload(db), *d_y = dev.zeros(ys), *d_dx = dev.zeros(xs);
      std::vector<float> y(ys), dx(xs);
      cpu_->linear_forward(c.m, c.k, c.n, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      cpu_->linear_backward_data(c.m, c.k, c.n, dy.data(), w.data(), dx.data());
      cpu_->linear_backward_weight(c.m, c.k, c.n, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      dev_->linear_forward(c.m, c.k, c.n, d_x, d_w, bias ? dev.upload(b) : nullptr, d_y);
      dev_->linear_backward_data(c.m, c.k, c.n, d_dy, d_w, d_dx);
      dev_->linear_backward_weight(c.m, c.k, c.n, d_x, d_dy, d_dw, bias ? d_db : nullptr);
      const std::string what = "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" +
                               std::to_string(c.n) + (bias ? " bias" : "");
      EXPECT_TRUE(all_close(dev.download(d_y, ys), y, 1e-5, 1e-4, "linear y " + what));
      EXPECT_TRUE(all_close(dev.download(d_dx, xs), dx, 1e-5, 1e-4, "linear dx " + what));
      EXPECT_TRUE(all_close(dev.download(d_dw, ws), dw, 1e-4, 1e-4, "linear dw " + what));
      EXPECT_TRUE(all_close(dev.download(d_db, db.size()), db, 1e-4, 1e-4, "linear db " + what));
    }
}

TEST_P(Kernels, ReluAndFill) {
  for (size_t n : {size_t{1}, size_t{255}, size_t{70001}}) {  // the last wraps the grid-stride loop
    auto x = random_vec(n, n), dy = random_vec(n, n + 1);
    std::vector<float> y(n), dx(n);
    cpu_->relu_forward(n, x.data(), y.data());
    cpu_->relu_backward(n, y.data(), dy.data(), dx.data());
    DeviceBuffers dev(*dev_);
    float *d_x = dev.upload(x), *d_y = dev.zeros(n), *d_dx = dev.zeros(n);
    dev_->relu_forward(n, d_x, d_y);
    dev_->relu_backward(n, d_y, dev.upload(dy), d_dx);
    EXPECT_TRUE(all_close(dev.download(d_y, n), y, 0, 0, "relu y"));
    EXPECT_TRUE(all_close(dev.download(d_dx, n), dx, 0, 0, "relu dx"));
    dev_->relu_forward(n, d_x, d_x);  // in place
    EXPECT_TRUE(all_close(dev.download(d_x, n), y, 0, 0, "relu in place"));
    dev_->fill(d_x, n, -2.5f);
    EXPECT_TRUE(all_close(dev.download(d_x, n), std::vector<float>(n, -2.5f), 0, 0, "fill"));
  }
}

PoolDesc pool(int n, int h, int w, int c, int k, int stride, int pad) {
  PoolDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.r = d.s = k, d.stride = stride, d.pad = pad;
  return d;
}

// Same comparisons in the same order as the CPU reference, so results match exactly, overlapping windows
// (3x3 stride 2) included.
TEST_P(Kernels, MaxPoolExact) {
  uint64_t seed = 400;
  for (const PoolDesc& d : {pool(3, 7, 9, 5, 2, 2, 0), pool(2, 9, 8, 33, 3, 2, 1), pool(2, 5, 6, 3, 3, 1, 1)}) {
    const size_t xs = static_cast<size_t>(d.n) * d.h * d.w * d.c, ys = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
    auto x = random_vec(xs, ++seed), dy = random_vec(ys, ++seed);
    std::vector<float> y(ys), dx(xs);
    std::vector<int32_t> arg(ys);
    cpu_->maxpool_forward(d, x.data(), y.data(), arg.data());
    cpu_->maxpool_backward(d, dy.data(), arg.data(), dx.data());
    DeviceBuffers dev(*dev_);
    float *d_y = dev.zeros(ys), *d_dx = dev.upload(random_vec(xs, ++seed));
    int32_t* d_arg = dev.upload(std::vector<int32_t>(ys, -7));
    dev_->maxpool_forward(d, dev.upload(x), d_y, d_arg);
    dev_->maxpool_backward(d, dev.upload(dy), d_arg, d_dx);
    const std::string what = std::to_string(d.r) + "x" + std::to_string(d.s) + " stride " + std::to_string(d.stride);
    EXPECT_TRUE(all_close(dev.download(d_y, ys), y, 0, 0, "maxpool y " + what));
    EXPECT_EQ(dev.download(d_arg, ys), arg) << "maxpool argmax " << what;
    EXPECT_TRUE(all_close(dev.download(d_dx, xs), dx, 0, 0, "maxpool dx " + what));
  }
}

TEST_P(Kernels, SoftmaxCrossEntropy) {
  uint64_t seed = 500;
  // 300 rows: more than the grid's warps, so warps loop over rows.
  for (int n : {37, 300})
    for (int classes : {10, 45, 3})
      for (float eps : {0.f, 0.1f}) {
        auto z = random_vec(static_cast<size_t>(n) * classes, ++seed, -3.f, 3.f);
        std::vector<int32_t> labels(n);
        CounterRng rng(++seed, 1);
        for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
        labels[1] = 0;  // make some rows correct for sure
        z[static_cast<size_t>(1) * classes] = 10.f;
        std::vector<float> dz(z.size());
        double loss = 0.5;
        int64_t correct = 2;  // both accumulate onto what is there
        cpu_->softmax_xent(n, classes, z.data(), labels.data(), eps, 1.f / n, dz.data(), &loss, &correct);
        DeviceBuffers dev(*dev_);
        float* d_dz = dev.zeros(z.size());
        const float* d_z = dev.upload(z);
        const int32_t* d_labels = dev.upload(labels);
        double got_loss = 0.5;
        int64_t got_correct = 2;
        dev_->softmax_xent(n, classes, d_z, d_labels, eps, 1.f / n, d_dz, &got_loss, &got_correct);
        EXPECT_NEAR(got_loss, loss, 1e-5 * std::fabs(loss)) << n << " rows, " << classes << " classes, eps " << eps;
        EXPECT_EQ(got_correct, correct) << classes << " classes";
        EXPECT_TRUE(all_close(dev.download(d_dz, dz.size()), dz, 1e-6, 1e-4, "dlogits"));
        // Without a gradient buffer (evaluation).
        double eval_loss = 0;
        int64_t eval_correct = 0;
        dev_->softmax_xent(n, classes, d_z, d_labels, eps, 1.f, nullptr, &eval_loss, &eval_correct);
        EXPECT_NEAR(eval_loss, loss - 0.5, 1e-5 * std::fabs(loss));
        EXPECT_EQ(eval_correct, correct - 2);
      }
}

TEST_P(Kernels, SgdMomentumAndNesterov) {
  for (bool nesterov : {false, true}) {
    const size_t n = 70001;
    auto w = random_vec(n, 600 + nesterov), g = random_vec(n, 610), v = random_vec(n, 620);
    DeviceBuffers dev(*dev_);
    float *d_w = dev.upload(w), *d_v = dev.upload(v);
    const float* d_g = dev.upload(g);
    for (int step = 0; step < 2; ++step) {
      cpu_->sgd_update(n, w.data(), g.data(), v.data(), 0.1f, 0.9f, 5e-4f, nesterov);
      dev_->sgd_update(n, d_w, d_g, d_v, 0.1f, 0.9f, 5e-4f, nesterov);
    }
    EXPECT_TRUE(all_close(dev.download(d_w, n), w, 1e-6, 1e-5, nesterov ? "nesterov w" : "sgd w"));
    EXPECT_TRUE(all_close(dev.download(d_v, n), v, 1e-6, 1e-5, nesterov ? "nesterov v" : "sgd v"));
  }
}

TEST_P(Kernels, CopyUploadDownloadLargerThanStaging) {
  const size_t n = (9u << 20) / sizeof(float) + 3;  // three pieces through the 4 MiB pinned buffers
  auto x = random_vec(n, 700);
  DeviceBuffers dev(*dev_);
  float* d_x = dev.upload(x);
  float* d_y = dev.zeros(n);
  dev_->copy(d_y, d_x, n * sizeof(float));
  dev_->synchronize();
  EXPECT_TRUE(all_close(dev.download(d_y, n), x, 0, 0, "copy"));
}

INSTANTIATE_TEST_SUITE_P(Targets, Kernels, ::testing::ValuesIn(all_targets()), target_name);

}  // namespace
}  // namespace cnn::test
