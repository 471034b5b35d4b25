#include "tests/bench/conv_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/dnnl_ops.h"

namespace cnn::bench {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

ConvDesc conv(int n, int h, int c, int k, int r, int stride) {
  ConvDesc d;
  d.n = n, d.h = d.w = h, d.c = c, d.k = k, d.r = d.s = r, d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = r / 2;
  return d;
}
ConvDesc unpadded(ConvDesc d) {
  d.pad_h = d.pad_w = 0;
  return d;
}
// Depthwise 3x3 (groups == c == k), as MobileNetV2's inverted residual blocks run it.
ConvDesc depthwise(int n, int h, int c, int stride) {
  ConvDesc d = conv(n, h, c, c, 3, stride);
  d.groups = c;
  return d;
}

}  // namespace

void conv_table(const std::vector<int>& threads, const Peak& peak, int reps) {
  struct Shape {
    const char* where;
    ConvDesc d;
  };
  const Shape shapes[] = {{"lenet5 conv1", conv(256, 28, 1, 6, 5, 1)},
                          {"lenet5 conv2", unpadded(conv(256, 14, 6, 16, 5, 1))},
                          {"resnet20 conv1", conv(128, 32, 3, 16, 3, 1)},
                          {"resnet20 stage 1", conv(128, 32, 16, 16, 3, 1)},
                          {"resnet20 2.0 conv1", conv(128, 32, 16, 32, 3, 2)},
                          {"resnet20 stage 2", conv(128, 16, 32, 32, 3, 1)},
                          {"resnet20 3.0 conv1", conv(128, 16, 32, 64, 3, 2)},
                          {"resnet20 stage 3", conv(128, 8, 64, 64, 3, 1)},
                          {"resnet50 stem", conv(32, 224, 3, 64, 7, 2)},
                          {"resnet50 1.x conv2", conv(32, 56, 64, 64, 3, 1)},
                          {"resnet50 1.x conv3", conv(32, 56, 64, 256, 1, 1)},
                          {"resnet50 2.0 conv2", conv(32, 56, 128, 128, 3, 2)},
                          {"resnet50 4.x conv2", conv(32, 7, 512, 512, 3, 1)},
                          {"mobilenetv2 dw 1", depthwise(32, 112, 32, 1)},
                          {"mobilenetv2 dw 2.0", depthwise(32, 112, 96, 2)},
                          {"mobilenetv2 dw 2.1", depthwise(32, 56, 144, 1)},
                          {"mobilenetv2 dw 4.x", depthwise(32, 14, 384, 1)},
                          {"mobilenetv2 dw 7.x", depthwise(32, 7, 960, 1)}};
  std::printf("\nConvolutions (no bias) op by op as the fast CPU backend runs them: GFLOP/s and %% of the measured "
              "peak of the threads used, median | best of %d\n(nominal FLOPs: padded taps count; backward-data of "
              "stride-1 convs runs as a forward convolution with flipped filters)\n", reps);
  std::printf("%-20s %-20s %3s  %-24s %-24s %-24s\n", "shape", "n,HxW,C->K,RxS/str", "thr", "forward",
              "backward-data", "backward-filter");
  for (const Shape& s : shapes) {
    const ConvDesc& d = s.d;
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    const size_t nw = static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups);
    std::vector<float> x(nx, 0.5f), y(ny, 0.25f), w(nw, 0.01f), dw(nw, 0.f), dx(nx);
    const double flops = 2.0 * d.n * d.p() * d.q() * d.k * d.r * d.s * (d.c / d.groups);
    std::string impl;
    for (int t : threads) {
      DnnlOps ops(t);
      impl = ops.conv_impl(d);
      std::function<void()> fn[3] = {[&] { ops.conv_forward(d, x.data(), w.data(), nullptr, y.data()); },
                                     [&] { ops.conv_backward_data(d, y.data(), w.data(), dx.data()); },
                                     [&] { ops.conv_backward_filter(d, x.data(), y.data(), dw.data(), nullptr); }};
      char cell[3][80];
      bool own[3];
      for (int k = 0; k < 3; ++k) {
        const uint64_t before = ops.small_conv_runs();
        fn[k]();
        own[k] = ops.small_conv_runs() != before;
        std::vector<double> ts;
        for (int rep = 0; rep < reps; ++rep) {
          auto t0 = std::chrono::steady_clock::now();
          fn[k]();
          ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double gf = flops / median(ts) / 1e9, best = flops / *std::min_element(ts.begin(), ts.end()) / 1e9;
        const double pk = peak.per_core * t;
        std::snprintf(cell[k], sizeof cell[k], "%5.0f %3.0f%% | %5.0f %3.0f%%", gf, 100 * gf / pk, best,
                      100 * best / pk);
      }
      char shape[48];
      std::snprintf(shape, sizeof shape, "%d,%dx%d,%d->%d,%dx%d/%d%s", d.n, d.h, d.w, d.c, d.k, d.r, d.s, d.stride_h,
                    d.groups > 1 ? " dw" : "");
      std::printf("%-20s %-20s %3d  %-24s %-24s %-24s\n", s.where, shape, t, cell[0], cell[1], cell[2]);
      if (own[0] || own[1] || own[2])
        impl += std::string(" (cnntrain's own kernels instead:") + (own[0] ? " forward" : "") +
                (own[1] ? " backward-data" : "") + (own[2] ? " backward-filter" : "") + ")";
    }
    std::printf("%-20s oneDNN: %s\n", "", impl.c_str());
  }
}

}  // namespace cnn::bench
