// Sweep cases: the ops on activations (backend.h) in bf16 and fp16, on inputs in [-1, 1] rounded to the
// type. The oracle is the reference backend's op in the same type: the fp32 reference kernel on the widened
// inputs, rounded once (for the conversion and the loss, whose reference code the fast CPU backend runs
// itself: the exact value rounded once, tests/backend/oracles.h). A backend that also computes in fp32 and
// rounds once may land one unit in the last place away when the two results straddle a rounding boundary, so
// arithmetic outputs get rtol = 2 * the type's unit roundoff (two roundings; the one-rounding rule against the
// unrounded fp32 result is tests/backend/half_rule_test.cpp). Ops that only move or select values, or compute
// one product per element, are exact.
#include <cmath>
#include <utility>

#include "kernels/batchnorm.h"
#include "kernels/pooling.h"
#include "kernels/rng.h"
#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"
#include "tests/common/half_test_util.h"

namespace cnn::sweep {

namespace {

using test::to_bits;

// Two roundings of a result (the backend's and the oracle's) plus atol for the fp32 accumulation order.
Tol rounded(DType t, double atol) { return {atol, 2 * unit_roundoff(t)}; }

std::string tag(DType t, const std::string& shape) { return std::string(dtype_name(t)) + " " + shape; }

// 16-bit device copy of x rounded to t, and NaN-filled 16-bit outputs.
const void* up16(Run& r, const std::vector<float>& x, DType t) { return r.upload(to_bits(x, t)); }
void* garbage16(Run& r, size_t n, DType t) {
  return r.upload(to_bits(std::vector<float>(n, std::nanf("")), t));
}

ConvDesc conv(int n, int h, int w, int c, int k, int r, int s, int stride, int pad) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = r, d.s = s;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad;
  return d;
}
size_t in_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups); }
std::string describe(const ConvDesc& d) {
  return "n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) + " c" +
         std::to_string(d.c) + " k" + std::to_string(d.k) + " " + std::to_string(d.r) + "x" + std::to_string(d.s) +
         " stride " + std::to_string(d.stride_h) + " pad " + std::to_string(d.pad_h) +
         (d.plain() ? "" : " groups " + std::to_string(d.groups) + " dilation " + std::to_string(d.dilation_h) +
                               " extra pad " + std::to_string(d.extra_pad_h) + "," + std::to_string(d.extra_pad_w));
}
ConvDesc general(ConvDesc d, int groups, int dilation, int extra_h, int extra_w) {
  d.groups = groups, d.dilation_h = d.dilation_w = dilation, d.extra_pad_h = extra_h, d.extra_pad_w = extra_w;
  return d;
}

// 3x3 same (ragged); several 16-deep k tiles with K over one N tile; 1x1 stride 2; the 64-channel blocked
// layouts of oneDNN; a long n*p*q reduction that splits the weight gradient; grouped, depthwise (stride 2)
// and dilated with asymmetric padding.
const ConvDesc kConvs[] = {conv(3, 9, 7, 3, 5, 3, 3, 1, 1),
                           conv(2, 10, 11, 21, 70, 3, 3, 1, 1),
                           conv(2, 7, 7, 67, 6, 1, 1, 2, 0),
                           conv(1, 8, 8, 64, 64, 3, 3, 1, 1),
                           conv(5, 12, 12, 2, 7, 3, 3, 1, 1),
                           general(conv(2, 9, 8, 16, 24, 3, 3, 1, 1), 4, 1, 0, 0),
                           general(conv(2, 10, 11, 32, 32, 3, 3, 2, 1), 32, 1, 0, 0),
                           general(conv(2, 11, 9, 6, 10, 3, 3, 1, 1), 1, 2, 1, 2)};

PoolDesc pool(int n, int h, int w, int c, int r, int s, int stride, int pad) {
  PoolDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.r = r, d.s = s, d.stride = stride, d.pad = pad;
  return d;
}

void add_conv_linear(DType t) {
  uint64_t seed = 7000 + static_cast<uint64_t>(t) * 1000;
  for (const ConvDesc& d : kConvs) {
    const uint64_t s = seed += 10;
    for (bool bias : {true, false})
      add_case({"conv2d_forward", tag(t, describe(d) + (bias ? " bias" : "")), {}, [=](Run& r) {
        void* d_y = garbage16(r, out_size(d), t);
        r.be.conv2d_forward(t, d, up16(r, random_vec(in_size(d), s), t), up16(r, random_vec(filter_size(d), s + 1), t),
                               bias ? r.upload(random_vec(d.k, s + 2)) : nullptr, d_y);
        r.output("y", t, d_y, out_size(d), rounded(t, winograd_shape(d) ? kWinogradAtol : 1e-5));
      }});
    add_case({"conv2d_backward_data", tag(t, describe(d)), {}, [=](Run& r) {
      void* d_dx = garbage16(r, in_size(d), t);
      r.be.conv2d_backward_data(t, d, up16(r, random_vec(out_size(d), s + 3), t),
                                   up16(r, random_vec(filter_size(d), s + 1), t), d_dx);
      r.output("dx", t, d_dx, in_size(d), rounded(t, winograd_shape(d) ? kWinogradAtol : 1e-5));
    }});
    add_case({"conv2d_backward_filter", tag(t, describe(d)), {}, [=](Run& r) {
      const auto dw0 = random_vec(filter_size(d), s + 4);
      float* d_dw = r.upload(dw0);  // fp32, accumulated onto
      float* d_db = r.upload(random_vec(d.k, s + 5));
      r.be.conv2d_backward_filter(t, d, up16(r, random_vec(in_size(d), s), t),
                                     up16(r, random_vec(out_size(d), s + 3), t), d_dw, d_db);
      // What was added to dw, to a tolerance relative to it: cuDNN's legacy API writes a 16-bit convolution's
      // filter gradient in the data's type, rounded once before it joins fp32 dw (as under PyTorch's autocast;
      // seen on an H100: errors up to half a 16-bit unit of the gradient); the custom kernels keep fp32.
      std::vector<double> added(filter_size(d));
      const auto dw = r.download(d_dw, filter_size(d));
      for (size_t i = 0; i < added.size(); ++i) added[i] = static_cast<double>(dw[i]) - dw0[i];
      r.output_host("dw added", std::move(added), rounded(t, 1e-4));
      r.output("db", d_db, d.k, Tol{1e-4, 1e-4});
    }});
  }
  struct Mm {
    int m, k, n;
  };
  for (Mm c : {Mm{37, 70, 13}, Mm{130, 17, 3}, Mm{64, 1568, 128}, Mm{1, 1, 1}}) {
    const uint64_t s = seed += 10;
    const size_t xs = static_cast<size_t>(c.m) * c.k, ws = static_cast<size_t>(c.n) * c.k;
    const size_t ys = static_cast<size_t>(c.m) * c.n;
    const std::string shape = tag(t, "m" + std::to_string(c.m) + " k" + std::to_string(c.k) + " n" +
                                         std::to_string(c.n));
    add_case({"linear_forward", shape, {}, [=](Run& r) {
      void* d_y = garbage16(r, ys, t);
      r.be.linear_forward(t, c.m, c.k, c.n, up16(r, random_vec(xs, s), t), up16(r, random_vec(ws, s + 1), t),
                             r.upload(random_vec(c.n, s + 2)), d_y);
      r.output("y", t, d_y, ys, rounded(t, 1e-5));
    }});
    add_case({"linear_backward_data", shape, {}, [=](Run& r) {
      void* d_dx = garbage16(r, xs, t);
      r.be.linear_backward_data(t, c.m, c.k, c.n, up16(r, random_vec(ys, s + 3), t),
                                   up16(r, random_vec(ws, s + 1), t), d_dx);
      r.output("dx", t, d_dx, xs, rounded(t, 1e-5));
    }});
    add_case({"linear_backward_weight", shape, {}, [=](Run& r) {
      float* d_dw = r.upload(random_vec(ws, s + 4));
      float* d_db = r.upload(random_vec(c.n, s + 5));
      r.be.linear_backward_weight(t, c.m, c.k, c.n, up16(r, random_vec(xs, s), t),
                                     up16(r, random_vec(ys, s + 3), t), d_dw, d_db);
      r.output("dw", d_dw, ws, Tol{1e-4, 1e-4});
      r.output("db", d_db, c.n, Tol{1e-4, 1e-4});
    }});
  }
}

void add_pointwise(DType t) {
  for (size_t n : {size_t{1}, size_t{37}, size_t{70001}}) {  // the last wraps grid-stride loops
    const std::string shape = tag(t, "n=" + std::to_string(n));
    add_case({"convert", shape, {}, [=](Run& r) {
      const auto x = random_vec(n, 1, -70000.f, 70000.f);  // fp16 overflows to inf past 65520
      void* d_h = garbage16(r, n, t);
      float* d_back = r.garbage(n);
      void* d_copy = garbage16(r, n, t);
      r.be.convert(n, DType::kF32, r.upload(x), t, d_h);
      r.be.convert(n, t, d_h, DType::kF32, d_back);
      r.be.convert(n, t, d_h, t, d_copy);
      r.output("narrowed", t, d_h, n, kExact);
      r.output("widened", d_back, n, kExact);
      r.output("copied", t, d_copy, n, kExact);
    }, [=](Run& r) {  // the conversion is the code under test on every host backend: the formats' definitions
      const auto x = oracle::through16(t, random_vec(n, 1, -70000.f, 70000.f));
      r.output_host("narrowed", x, kExact);
      r.output_host("widened", x, kExact);
      r.output_host("copied", x, kExact);
    }});
    add_case({"relu_forward", shape, {"relu_backward"}, [=](Run& r) {
      void* d_y = garbage16(r, n, t);
      void* d_dx = garbage16(r, n, t);
      const void* d_x = up16(r, random_vec(n, 2), t);
      r.be.relu_forward(t, n, d_x, d_y);
      r.be.relu_backward(t, n, d_y, up16(r, random_vec(n, 3), t), d_dx);
      r.output("y", t, d_y, n, kExact);
      r.output("dx", t, d_dx, n, kExact);
      r.be.relu_forward(t, n, d_y, d_y);  // in place
      r.output("y in place", t, d_y, n, kExact);
    }});
    add_case({"relu_backward", shape, {}, [=](Run& r) {
      void* d_dx = garbage16(r, n, t);
      r.be.relu_backward(t, n, up16(r, random_vec(n, 4), t), up16(r, random_vec(n, 5), t), d_dx);
      r.output("dx", t, d_dx, n, kExact);
    }});
    add_case({"axpy", shape, {}, [=](Run& r) {
      void* d_y = const_cast<void*>(up16(r, random_vec(n, 6), t));
      r.be.axpy(t, n, 0.3f, up16(r, random_vec(n, 7), t), d_y);
      r.output("y", t, d_y, n, rounded(t, 0));
    }});
  }
  for (int stride : {1, 2}) {
    const int n = 2, h = 7, w = 8, c = 3, k = 8, P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
    const size_t xs = static_cast<size_t>(n) * h * w * c, ys = static_cast<size_t>(n) * P * Q * k;
    const std::string shape = tag(t, "n2 7x8 c3 -> k8 stride " + std::to_string(stride));
    add_case({"shortcut_pad_forward", shape, {"shortcut_pad_backward_add"}, [=](Run& r) {
      void* d_y = garbage16(r, ys, t);
      void* d_dx = r.upload(to_bits(random_vec(xs, 10), t));
      r.be.shortcut_pad_forward(t, n, h, w, c, stride, k, up16(r, random_vec(xs, 8), t), d_y);
      r.be.shortcut_pad_backward_add(t, n, h, w, c, stride, k, up16(r, random_vec(ys, 9), t), d_dx);
      r.output("y", t, d_y, ys, kExact);
      r.output("dx", t, d_dx, xs, kExact);
    }});
    add_case({"shortcut_pad_backward_add", shape, {}, [=](Run& r) {
      void* d_dx = r.upload(to_bits(random_vec(xs, 20), t));  // added to at the sampled pixels, kept elsewhere
      r.be.shortcut_pad_backward_add(t, n, h, w, c, stride, k, up16(r, random_vec(ys, 19), t), d_dx);
      r.output("dx", t, d_dx, xs, kExact);
    }});
  }
}

void add_dropout(DType t) {
  // n x 1: one draw per sample (stochastic depth's scales, src/model/join_layers.cpp).
  for (const auto& [n, per] : {std::pair{4, size_t{1001}}, std::pair{4, size_t{7}}, std::pair{2053, size_t{1}}}) {
    const size_t count = n * per;
    const std::string shape = tag(t, "n" + std::to_string(n) + " x " + std::to_string(per));
    std::vector<int64_t> ids = {7, 123456789, 0, 42};
    for (int i = 4; i < n; ++i) ids.push_back(1000 + 3 * i);
    add_case({"dropout_forward", shape, {"dropout_backward"}, [=](Run& r) {
      void* d_y = garbage16(r, count, t);
      void* d_dx = garbage16(r, count, t);
      uint8_t* d_mask = r.upload(std::vector<uint8_t>(count, 7));
      r.be.dropout_forward(t, n, per, up16(r, random_vec(count, 10), t), 0.3f, 0x5eed, r.upload(ids), d_y, d_mask);
      r.be.dropout_backward(t, count, 0.3f, up16(r, random_vec(count, 11), t), d_mask, d_dx);
      r.output("mask", d_mask, count);
      r.output("y", t, d_y, count, kExact);
      r.output("dx", t, d_dx, count, kExact);
    }});
    add_case({"dropout_backward", shape, {}, [=](Run& r) {
      std::vector<uint8_t> mask(count);
      CounterRng rng(14, 3);
      for (auto& m : mask) m = rng.uniform() >= 0.3f;
      void* d_dx = garbage16(r, count, t);
      r.be.dropout_backward(t, count, 0.3f, up16(r, random_vec(count, 15), t), r.upload(mask), d_dx);
      r.output("dx", t, d_dx, count, kExact);
    }});
  }
}

void add_pooling(DType t) {
  uint64_t seed = 9000;
  for (const PoolDesc& d : {pool(3, 7, 9, 5, 2, 2, 2, 0), pool(2, 9, 8, 33, 3, 3, 2, 1), pool(2, 6, 5, 7, 6, 5, 1, 0)}) {
    const uint64_t s = seed += 10;
    const size_t xs = static_cast<size_t>(d.n) * d.h * d.w * d.c, ys = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
    const std::string shape = tag(t, "n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" +
                                         std::to_string(d.w) + " c" + std::to_string(d.c) + " window " +
                                         std::to_string(d.r) + "x" + std::to_string(d.s) + " stride " +
                                         std::to_string(d.stride) + " pad " + std::to_string(d.pad));
    for (bool relu : {false, true}) {  // relu: the pooling of a ReLU's output, fused
      const std::string pshape = shape + (relu ? " relu" : "");
      add_case({"maxpool_forward", pshape, {}, [=](Run& r) {
        void* d_y = garbage16(r, ys, t);
        int32_t* d_arg = r.upload(std::vector<int32_t>(ys, -7));
        r.be.maxpool_forward(t, d, up16(r, random_vec(xs, s), t), relu, d_y, d_arg);
        r.output("y", t, d_y, ys, kExact);
        r.output("argmax", d_arg, ys);
      }});
      add_case({"maxpool_backward", pshape, {}, [=](Run& r) {
        std::vector<float> x = test::random_rounded(xs, s, t), y(ys);
        std::vector<int32_t> arg(ys);
        // The winners (and the ReLU's output, exact in 16 bits: a max selects an input), so the backward runs
        // alone.
        maxpool_forward_cpu(d, x.data(), relu, y.data(), arg.data());
        void* d_dx = garbage16(r, xs, t);
        r.be.maxpool_backward(t, d, up16(r, random_vec(ys, s + 1), t), relu ? up16(r, y, t) : nullptr,
                                 r.upload(arg), d_dx);
        r.output("dx", t, d_dx, xs, rounded(t, 0));  // overlapping windows: a few additions in any order
      }});
    }
    add_case({"avgpool_forward", shape, {"avgpool_backward"}, [=](Run& r) {
      void* d_y = garbage16(r, ys, t);
      void* d_dx = garbage16(r, xs, t);
      r.be.avgpool_forward(t, d, up16(r, random_vec(xs, s + 2), t), d_y);
      r.be.avgpool_backward(t, d, up16(r, random_vec(ys, s + 3), t), d_dx);
      r.output("y", t, d_y, ys, rounded(t, 1e-6));
      r.output("dx", t, d_dx, xs, rounded(t, 1e-6));
    }});
    add_case({"avgpool_backward", shape, {}, [=](Run& r) {
      void* d_dx = garbage16(r, xs, t);
      r.be.avgpool_backward(t, d, up16(r, random_vec(ys, s + 4), t), d_dx);
      r.output("dx", t, d_dx, xs, rounded(t, 1e-6));
    }});
  }
}

void add_batchnorm(DType t) {
  const float eps = 1e-5f, momentum = 0.1f;
  for (int rows : {2, 37, 1100}) {
    const int c = 45;
    const size_t nx = static_cast<size_t>(rows) * c;
    const uint64_t s = 11000 + rows;
    const std::string shape = tag(t, "rows " + std::to_string(rows) + " c 45");
    // Channel means up to 3 * 44: the fp32 statistics of 16-bit inputs must not lose the variance.
    auto input = [=] {
      auto x = random_vec(nx, s);
      for (size_t i = 0; i < x.size(); ++i) x[i] += 3.f * static_cast<float>(i % c);
      return test::from_bits(to_bits(x, t), t);
    };
    for (const BnEpilogue ep : kBnEpilogues) {
      const std::string eshape = shape + ep.name();
      add_case({"batchnorm_forward_train", eshape, {"batchnorm_forward_infer"}, [=](Run& r) {
        void* d_y = garbage16(r, nx, t);
        void* d_yi = garbage16(r, nx, t);
        float *d_mean = r.garbage(c), *d_invstd = r.garbage(c);
        float* d_rm = r.upload(random_vec(c, s + 1));
        float* d_rv = r.upload(random_vec(c, s + 2, 0.5f, 2.f));
        uint32_t* d_mask = r.upload(std::vector<uint32_t>(relu_mask_words(nx), 0x5a5a5a5au));
        const float *d_g = r.upload(random_vec(c, s + 3)), *d_b = r.upload(random_vec(c, s + 4));
        const void* d_x = up16(r, input(), t);
        const void* d_z = ep.residual ? up16(r, random_vec(nx, s + 8), t) : nullptr;
        r.be.batchnorm_forward_infer(t, rows, c, d_x, d_z, d_g, d_b, d_rm, d_rv, eps, ep.act(), d_yi);
        r.be.batchnorm_forward_train(t, rows, c, d_x, d_z, d_g, d_b, eps, momentum, ep.act(), d_y, d_mask, d_mean,
                                        d_invstd, d_rm, d_rv);
        r.output("y infer", t, d_yi, nx, rounded(t, 1e-5));
        r.output("y", t, d_y, nx, rounded(t, 1e-4));
        r.output("save_mean", d_mean, c, kDefault);
        r.output("save_invstd", d_invstd, c, kDefault);
        r.output("running_mean", d_rm, c, kDefault);
        r.output("running_var", d_rv, c, kDefault);
        if (ep.relu) r.output_host("relu_mask", mask_bits(r, d_mask, nx), kExact);
      }});
      add_case({"batchnorm_forward_infer", eshape, {}, [=](Run& r) {
        void* d_y = garbage16(r, nx, t);
        const void* d_z = ep.residual ? up16(r, random_vec(nx, s + 9), t) : nullptr;
        r.be.batchnorm_forward_infer(t, rows, c, up16(r, input(), t), d_z, r.upload(random_vec(c, s + 3)),
                                        r.upload(random_vec(c, s + 4)), r.upload(random_vec(c, s + 10, 0.f, 100.f)),
                                        r.upload(random_vec(c, s + 2, 0.5f, 2.f)), eps, ep.act(), d_y);
        r.output("y", t, d_y, nx, rounded(t, 1e-5));
      }});
      add_case({"batchnorm_backward", eshape, {}, [=](Run& r) {
        const auto x = input();
        const auto gamma = random_vec(c, s + 3), z = test::random_rounded(nx, s + 8, t);
        std::vector<float> y(nx), mean(c), invstd(c), rm(c, 0.f), rv(c, 1.f);
        std::vector<uint32_t> mask(relu_mask_words(nx));
        batchnorm_forward_train_cpu(rows, c, x.data(), ep.residual ? z.data() : nullptr, gamma.data(),
                                    random_vec(c, s + 4).data(), eps, momentum, ep.act(), y.data(), mask.data(),
                                    mean.data(), invstd.data(), rm.data(), rv.data());
        void* d_dx = garbage16(r, nx, t);
        void* d_dz = ep.residual ? garbage16(r, nx, t) : nullptr;
        float* d_dgamma = r.upload(random_vec(c, s + 5));
        float* d_dbeta = r.upload(random_vec(c, s + 6));
        const void* d_x = up16(r, x, t);
        const float* d_gamma = r.upload(gamma);
        // A forward pass of this shape first, as in training: cuDNN's backward takes its epsilon.
        r.be.batchnorm_forward_train(t, rows, c, d_x, nullptr, d_gamma, d_gamma, eps, momentum, false,
                                        garbage16(r, nx, t), r.upload(std::vector<uint32_t>(relu_mask_words(nx))),
                                        r.garbage(c), r.garbage(c), r.upload(rm), r.upload(rv));
        r.be.batchnorm_backward(t, rows, c, d_x, ep.relu ? r.upload(mask) : nullptr,
                                   up16(r, random_vec(nx, s + 7), t), d_gamma, r.upload(mean), r.upload(invstd), d_dx,
                                   d_dz, d_dgamma, d_dbeta);
        r.output("dx", t, d_dx, nx, rounded(t, 1e-4));
        if (ep.residual) r.output("dresidual", t, d_dz, nx, kExact);  // dy masked: values move, no arithmetic
        r.output("dgamma", d_dgamma, c, Tol{1e-4, 1e-4});
        r.output("dbeta", d_dbeta, c, Tol{1e-4, 1e-4});
      }});
    }
  }
}

void add_softmax_xent(DType t) {
  for (int n : {1, 300})
    for (int classes : {10, 45}) {
      add_case({"softmax_xent", tag(t, "n " + std::to_string(n) + " classes " + std::to_string(classes)), {},
                [=](Run& r) {
                  const uint64_t s = 12000 + n * 64 + classes;
                  std::vector<int32_t> labels(n);
                  CounterRng rng(s + 1, 1);
                  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
                  void* d_dz = garbage16(r, static_cast<size_t>(n) * classes, t);
                  double loss = 0.5;
                  int64_t correct = 2;
                  // The scale of fp16 loss scaling: the gradient carries it, the loss does not.
                  r.be.softmax_xent(t, n, classes, up16(r, random_vec(static_cast<size_t>(n) * classes, s, -3.f, 3.f), t),
                                       r.upload(labels), 0.1f, 65536.f / n, d_dz, &loss, &correct);
                  r.output_host("loss_sum", {loss}, Tol{0, 1e-5});
                  r.output_host("correct", {static_cast<double>(correct)}, kExact);
                  r.output("dlogits", t, d_dz, static_cast<size_t>(n) * classes, rounded(t, 1e-3));
                }, [=](Run& r) {
                  const uint64_t s = 12000 + n * 64 + classes;
                  std::vector<int32_t> labels(n);
                  CounterRng rng(s + 1, 1);
                  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
                  const oracle::Xent o = oracle::softmax_xent(
                      n, classes, oracle::through16(t, random_vec(static_cast<size_t>(n) * classes, s, -3.f, 3.f)),
                      labels, 0.1f, 65536.f / n);
                  r.output_host("loss_sum", {0.5 + o.loss_sum}, Tol{0, 1e-5});
                  r.output_host("correct", {2.0 + o.correct}, kExact);
                  r.output_host("dlogits", oracle::through16(t, o.dlogits), rounded(t, 1e-3));
                }});
    }
  add_case({"softmax_xent_totals", tag(t, "n 1, 33, 70 classes 7, accumulated"), {}, [=](Run& r) {
    LossTotals* d_totals = r.upload(std::vector<LossTotals>(1, LossTotals{0.5, 3}));  // added onto
    for (int n : {1, 33, 70}) {
      const int classes = 7;
      const size_t count = static_cast<size_t>(n) * classes;
      std::vector<int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (i * 5 + n) % classes;
      void* d_dz = garbage16(r, count, t);
      r.be.softmax_xent_totals(t, n, classes, up16(r, random_vec(count, 60 + n, -3.f, 3.f), t), r.upload(labels),
                                  0.1f, 65536.f / n, d_dz, d_totals);
      r.output("dlogits n " + std::to_string(n), t, d_dz, count, rounded(t, 1e-3));
    }
    const LossTotals lt = r.download(d_totals, 1)[0];
    r.output_host("loss sum", {lt.loss_sum}, Tol{1e-6, 1e-5});
    r.output_host("correct", {static_cast<double>(lt.correct)}, kExact);
  }, [=](Run& r) {
    oracle::Xent total{0.5, 3, {}};
    for (int n : {1, 33, 70}) {
      const int classes = 7;
      const size_t count = static_cast<size_t>(n) * classes;
      std::vector<int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (i * 5 + n) % classes;
      const auto z = oracle::through16(t, random_vec(count, 60 + n, -3.f, 3.f));
      const oracle::Xent o = oracle::softmax_xent(n, classes, z, labels, 0.1f, 65536.f / n);
      r.output_host("dlogits n " + std::to_string(n), oracle::through16(t, o.dlogits), rounded(t, 1e-3));
      total.loss_sum += o.loss_sum;
      total.correct += o.correct;
    }
    r.output_host("loss sum", {total.loss_sum}, Tol{1e-6, 1e-5});
    r.output_host("correct", {static_cast<double>(total.correct)}, kExact);
  }});
}

}  // namespace

CNN_SWEEP_CASES(half) {
  for (DType t : test::kHalfTypes) {
    add_conv_linear(t);
    add_pointwise(t);
    add_dropout(t);
    add_pooling(t);
    add_batchnorm(t);
    add_softmax_xent(t);
  }
}

}  // namespace cnn::sweep
