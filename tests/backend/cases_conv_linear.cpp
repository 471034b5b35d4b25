// Sweep cases: convolution and fully connected layers. Shapes are ragged against the CUDA kernels' 64x64x16
// GEMM tiles and oneDNN's vector widths; some reductions are long enough for split-K paths.
#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

ConvDesc conv(int n, int h, int w, int c, int k, int r, int s, int sh, int sw, int ph, int pw) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = r, d.s = s;
  d.stride_h = sh, d.stride_w = sw, d.pad_h = ph, d.pad_w = pw;
  return d;
}
// d with groups, dilation and extra_pad_h/w rows/columns of padding after the input.
ConvDesc general(ConvDesc d, int groups, int dil_h, int dil_w, int extra_h, int extra_w) {
  d.groups = groups, d.dilation_h = dil_h, d.dilation_w = dil_w, d.extra_pad_h = extra_h, d.extra_pad_w = extra_w;
  return d;
}

std::string describe(const ConvDesc& d) {
  return "n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) + " c" +
         std::to_string(d.c) + " k" + std::to_string(d.k) + " " + std::to_string(d.r) + "x" + std::to_string(d.s) +
         " stride " + std::to_string(d.stride_h) + "," + std::to_string(d.stride_w) + " pad " +
         std::to_string(d.pad_h) + "," + std::to_string(d.pad_w) +
         (d.plain() ? "" : " groups " + std::to_string(d.groups) + " dilation " + std::to_string(d.dilation_h) + "," +
                               std::to_string(d.dilation_w) + " extra pad " + std::to_string(d.extra_pad_h) + "," +
                               std::to_string(d.extra_pad_w));
}

size_t in_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups); }

// Sums of up to a few thousand products of values in [-1, 1]: float rounding grows with the reduction, so the
// absolute part of the tolerance is 1e-4 (the results are of order 10).
constexpr Tol kReduction{1e-4, 1e-4};
// y and dx of a convolution: kReduction, wider for the shapes a CPU backend may run on Winograd (sweep.h).
Tol conv_tol(const ConvDesc& d) { return winograd_shape(d) ? Tol{kWinogradAtol, kReduction.rtol} : kReduction; }

const ConvDesc kConvCases[] = {
    conv(3, 9, 7, 3, 5, 3, 3, 1, 1, 1, 1),     // 3x3 same, ragged everything
    conv(2, 11, 10, 5, 70, 3, 2, 2, 1, 1, 0),  // K over one N tile, rectangular filter, unequal strides
    conv(2, 7, 7, 67, 6, 1, 1, 2, 2, 0, 0),    // 1x1 stride 2, RSC over one K tile
    conv(2, 13, 12, 3, 9, 5, 5, 3, 3, 2, 2),   // 5x5 stride 3 pad 2
    conv(5, 12, 12, 2, 7, 3, 3, 1, 1, 1, 1),   // long N*P*Q: splits the filter gradient's reduction
    conv(2, 28, 28, 1, 16, 3, 3, 1, 1, 1, 1),  // fmnist_cnn conv1
    conv(3, 14, 14, 6, 16, 5, 5, 1, 1, 0, 0),  // lenet5 conv2
    conv(1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1),   // 64 channels: oneDNN's blocked layouts (Winograd without bias)
    conv(3, 11, 9, 80, 96, 3, 3, 1, 1, 1, 1),  // Winograd F(4x4,3x3) on the fast CPU backend: ragged 4x4 tiles
    conv(3, 10, 7, 16, 32, 1, 1, 2, 2, 0, 0),  // 1x1 projection shortcut
    conv(2, 9, 7, 24, 40, 1, 1, 1, 1, 0, 0),   // 1x1 stride 1 (the fast CPU backend's filter gradient: a matmul)
    conv(2, 28, 27, 1, 6, 5, 5, 1, 1, 2, 2),   // lenet5 conv1, a ragged width (the CPU's one-channel kernels)
    conv(3, 13, 15, 16, 16, 3, 3, 1, 1, 1, 1),  // resnet20 stage 1, odd sizes (the CPU's Winograd F(4x4,3x3))
};

// Grouped, depthwise, dilated and asymmetrically padded convolutions (MobileNet, EfficientNet, DeepLab, and
// TensorFlow's "same" padding at stride 2 as ONNX files carry it). Compared with a double-precision oracle
// (tests/backend/oracles.h), so the reference kernels are checked too (sweep_test.cpp).
const ConvDesc kGeneralConvCases[] = {
    general(conv(2, 9, 7, 8, 6, 3, 3, 1, 1, 1, 1), 2, 1, 1, 0, 0),        // 2 groups
    general(conv(2, 11, 10, 16, 12, 3, 3, 2, 2, 1, 1), 4, 1, 1, 0, 0),    // 4 groups, stride 2
    general(conv(2, 9, 9, 32, 32, 3, 3, 1, 1, 1, 1), 32, 1, 1, 0, 0),     // depthwise 3x3
    general(conv(2, 10, 11, 24, 24, 3, 3, 2, 2, 1, 1), 24, 1, 1, 0, 0),   // depthwise 3x3 stride 2
    general(conv(1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1), 64, 1, 1, 0, 0),     // depthwise, oneDNN's 16-channel blocks
    general(conv(2, 13, 12, 20, 20, 5, 5, 2, 2, 2, 2), 20, 1, 1, 0, 0),   // depthwise 5x5 stride 2 (EfficientNet)
    general(conv(2, 9, 8, 8, 16, 3, 3, 1, 1, 1, 1), 8, 1, 1, 0, 0),       // depthwise, channel multiplier 2
    general(conv(2, 12, 11, 5, 7, 3, 3, 1, 1, 2, 2), 1, 2, 2, 0, 0),      // dilation 2
    general(conv(2, 8, 9, 6, 10, 3, 3, 2, 2, 0, 0), 1, 1, 1, 1, 1),       // pads 0,0,1,1 at stride 2
    general(conv(2, 10, 9, 4, 6, 3, 2, 1, 2, 1, 0), 1, 2, 1, 1, 2),       // dilation 2,1, pads 1,0,2,2
    general(conv(2, 13, 11, 12, 8, 3, 3, 2, 2, 1, 1), 2, 2, 2, 1, 0),     // groups, dilation, asymmetric, stride 2
    general(conv(2, 12, 10, 16, 16, 3, 3, 2, 2, 0, 1), 16, 2, 2, 1, 1),   // depthwise dilated asymmetric stride 2
};

struct LinearCase {
  int m, k, n;
};
// Ragged everything; n over one tile; a batch long enough to split the weight gradient's reduction; the
// fmnist_cnn and lenet5 classifier shapes; the degenerate 1x1x1.
const LinearCase kLinearCases[] = {{37, 70, 13}, {5, 200, 66},    {130, 17, 3},  {1, 1, 1},
                                   {64, 1568, 128}, {33, 400, 120}, {5, 84, 10}};

std::string describe(const LinearCase& c) {
  return "m" + std::to_string(c.m) + " k" + std::to_string(c.k) + " n" + std::to_string(c.n);
}

}  // namespace

namespace {

// Each case draws its inputs from seeds of its own: `seed` advances by 10 per case. With `oracle` the expected
// outputs come from the double-precision definition instead of the reference kernels.
void add_conv_case(const ConvDesc& d, uint64_t& seed, bool oracle) {
  for (bool bias : {true, false}) {
    const std::string shape = describe(d) + (bias ? " bias" : "");
    const uint64_t s = seed += 10;
    add_case({"conv2d_forward", shape, {}, [d, bias, s](Run& r) {
      float* d_y = r.garbage(out_size(d));
      r.be.conv2d_forward(DType::kF32, d, r.upload(random_vec(in_size(d), s)),
                          r.upload(random_vec(filter_size(d), s + 1)),
                          bias ? r.upload(random_vec(d.k, s + 2)) : nullptr, d_y);
      r.output("y", d_y, out_size(d), conv_tol(d));
    }, !oracle ? nullptr : std::function<void(Run&)>([d, bias, s](Run& r) {
      const auto b = bias ? random_vec(d.k, s + 2) : std::vector<float>();
      r.output_host("y", oracle::conv2d_forward(d, random_vec(in_size(d), s), random_vec(filter_size(d), s + 1), b),
                    kReduction);
    })});
    // Parameter gradients accumulate onto what is there.
    add_case({"conv2d_backward_filter", shape, {}, [d, bias, s](Run& r) {
      float* d_dw = r.upload(random_vec(filter_size(d), s + 3));
      float* d_db = r.upload(random_vec(d.k, s + 4));
      r.be.conv2d_backward_filter(DType::kF32, d, r.upload(random_vec(in_size(d), s)),
                                  r.upload(random_vec(out_size(d), s + 5)), d_dw, bias ? d_db : nullptr);
      r.output("dw", d_dw, filter_size(d), kReduction);
      r.output("db", d_db, d.k, kReduction);  // unchanged without bias
    }, !oracle ? nullptr : std::function<void(Run&)>([d, bias, s](Run& r) {
      const auto db0 = random_vec(d.k, s + 4);
      const auto g = oracle::conv2d_backward_filter(d, random_vec(in_size(d), s), random_vec(out_size(d), s + 5),
                                                    random_vec(filter_size(d), s + 3),
                                                    bias ? db0 : std::vector<float>());
      r.output_host("dw", g.dw, kReduction);
      r.output_host("db", bias ? g.db : std::vector<double>(db0.begin(), db0.end()), kReduction);
    })});
  }
  const uint64_t s = seed += 10;
  add_case({"conv2d_backward_data", describe(d), {}, [d, s](Run& r) {
    float* d_dx = r.garbage(in_size(d));  // overwritten, not accumulated
    r.be.conv2d_backward_data(DType::kF32, d, r.upload(random_vec(out_size(d), s)),
                              r.upload(random_vec(filter_size(d), s + 1)), d_dx);
    r.output("dx", d_dx, in_size(d), conv_tol(d));
  }, !oracle ? nullptr : std::function<void(Run&)>([d, s](Run& r) {
    r.output_host("dx", oracle::conv2d_backward_data(d, random_vec(out_size(d), s), random_vec(filter_size(d), s + 1)),
                  kReduction);
  })});
}

void add_conv_cases(uint64_t& seed) {
  for (const ConvDesc& d : kConvCases) add_conv_case(d, seed, false);
  for (const ConvDesc& d : kGeneralConvCases) add_conv_case(d, seed, true);
}

// The input gradient added into a filled dx (a residual block's: Backend::conv2d_backward_data_add) where the
// backend says it can (the fast CPU backend's Winograd kernels: the 16- and 32-channel shapes; 64 channels on an
// 8x8 map have too few pixels for them), else computed and then added with an axpy, as the block does: against the
// reference's backward-data and axpy.
void add_conv_add_cases(uint64_t& seed) {
  for (const ConvDesc& d : {kConvCases[12], conv(2, 9, 10, 32, 32, 3, 3, 1, 1, 1, 1), kConvCases[7], kConvCases[0]}) {
    const uint64_t s = seed += 10;
    add_case({"conv2d_backward_data_add", describe(d), {"conv2d_backward_data_adds"}, [d, s](Run& r) {
      float* d_dx = r.upload(random_vec(in_size(d), s + 2));
      const float* d_dy = r.upload(random_vec(out_size(d), s));
      const float* d_w = r.upload(random_vec(filter_size(d), s + 1));
      if (r.be.conv2d_backward_data_adds(DType::kF32, d)) {
        r.be.conv2d_backward_data_add(DType::kF32, d, d_dy, d_w, d_dx);
      } else {
        float* d_g = r.garbage(in_size(d));
        r.be.conv2d_backward_data(DType::kF32, d, d_dy, d_w, d_g);
        r.be.axpy(DType::kF32, in_size(d), 1.f, d_g, d_dx);
      }
      r.output("dx", d_dx, in_size(d), conv_tol(d));
    }});
  }
}

void add_param_version_cases(uint64_t& seed) {
  // Parameter versions: under a new version the backend must use the parameters' new values (the fast CPU
  // backend keeps each filter re-laid out for oneDNN until the version changes). Versions from a range of
  // their own, apart from the ones nets draw.
  for (const ConvDesc& d : {kConvCases[0], kConvCases[7], kGeneralConvCases[4]}) {
    const uint64_t s = seed += 10;
    add_case({"set_param_version", describe(d), {"conv2d_forward", "conv2d_backward_data"}, [d, s](Run& r) {
      static uint64_t version = uint64_t{1} << 48;
      const float* d_x = r.upload(random_vec(in_size(d), s));
      const float* d_dy = r.upload(random_vec(out_size(d), s + 1));
      float* d_w = r.upload(random_vec(filter_size(d), s + 2));
      float *d_y = r.garbage(out_size(d)), *d_dx = r.garbage(in_size(d));
      r.be.set_param_version(++version);
      r.be.conv2d_forward(DType::kF32, d, d_x, d_w, nullptr, d_y);
      r.be.conv2d_backward_data(DType::kF32, d, d_dy, d_w, d_dx);
      const auto w2 = random_vec(filter_size(d), s + 3);  // an optimizer step: new values, new version
      r.be.upload(d_w, w2.data(), sizeof(float) * w2.size());
      r.be.set_param_version(++version);
      r.be.conv2d_forward(DType::kF32, d, d_x, d_w, nullptr, d_y);
      r.be.conv2d_backward_data(DType::kF32, d, d_dy, d_w, d_dx);
      r.be.set_param_version(0);
      r.output("y", d_y, out_size(d), conv_tol(d));
      r.output("dx", d_dx, in_size(d), conv_tol(d));
    }});
  }
}

// Both backward passes in one call (Backend::conv2d_backward; the fast CPU backend converts dy once for its
// Winograd kernels): the results of the two separate passes, with and without dx.
void add_conv_pair_cases(uint64_t& seed) {
  for (const ConvDesc& d : {kConvCases[0], kConvCases[7], kConvCases[8], kGeneralConvCases[2]}) {
    for (bool want_dx : {true, false}) {
      const uint64_t s = seed += 10;
      add_case({"conv2d_backward", describe(d) + (want_dx ? "" : " no dx"), {}, [d, want_dx, s](Run& r) {
        float* d_dw = r.upload(random_vec(filter_size(d), s + 3));
        float* d_dx = r.upload(random_vec(in_size(d), s + 4));  // untouched without dx
        r.be.conv2d_backward(DType::kF32, d, r.upload(random_vec(in_size(d), s)),
                             r.upload(random_vec(out_size(d), s + 1)), r.upload(random_vec(filter_size(d), s + 2)),
                             d_dw, nullptr, want_dx ? d_dx : nullptr);
        r.output("dw", d_dw, filter_size(d), kReduction);
        r.output("dx", d_dx, in_size(d), conv_tol(d));
      }});
    }
  }
}

void add_linear_cases(uint64_t& seed) {
  for (const LinearCase& c : kLinearCases) {
    const size_t xs = static_cast<size_t>(c.m) * c.k, ws = static_cast<size_t>(c.n) * c.k,
                 ys = static_cast<size_t>(c.m) * c.n;
    for (bool bias : {true, false}) {
      const uint64_t s = seed += 10;
      const std::string shape = describe(c) + (bias ? " bias" : "");
      add_case({"linear_forward", shape, {}, [=](Run& r) {
        float* d_y = r.garbage(ys);
        r.be.linear_forward(DType::kF32, c.m, c.k, c.n, r.upload(random_vec(xs, s)), r.upload(random_vec(ws, s + 1)),
                            bias ? r.upload(random_vec(c.n, s + 2)) : nullptr, d_y);
        r.output("y", d_y, ys, kReduction);
      }});
      add_case({"linear_backward_weight", shape, {}, [=](Run& r) {
        float* d_dw = r.upload(random_vec(ws, s + 3));
        float* d_db = r.upload(random_vec(c.n, s + 4));
        r.be.linear_backward_weight(DType::kF32, c.m, c.k, c.n, r.upload(random_vec(xs, s)),
                                    r.upload(random_vec(ys, s + 5)), d_dw, bias ? d_db : nullptr);
        r.output("dw", d_dw, ws, kReduction);
        r.output("db", d_db, c.n, kReduction);
      }});
    }
    const uint64_t s = seed += 10;
    add_case({"linear_backward_data", describe(c), {}, [=](Run& r) {
      float* d_dx = r.garbage(xs);
      r.be.linear_backward_data(DType::kF32, c.m, c.k, c.n, r.upload(random_vec(ys, s)),
                                r.upload(random_vec(ws, s + 1)), d_dx);
      r.output("dx", d_dx, xs, kReduction);
    }});
  }
}

}  // namespace

CNN_SWEEP_CASES(conv_linear) {
  uint64_t seed = 100;
  add_conv_cases(seed);
  add_conv_add_cases(seed);
  add_param_version_cases(seed);
  add_linear_cases(seed);
  add_conv_pair_cases(seed);
}

}  // namespace cnn::sweep
