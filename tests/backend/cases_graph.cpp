// Sweep cases: the graph-network ops (kernels/activation.h, kernels/join.h) in fp32, bf16 and fp16. The
// activations' fp32 outputs are compared with the double-precision oracle of their definitions
// (tests/backend/oracles.h), every target's (the fast CPU kernels share act_value with the reference, so the
// reference would vouch for itself); the joins, which only add, multiply or move, with the reference kernels.
// 16-bit cases follow cases_half.cpp: the reference op in the same type, two roundings' tolerance. Also ONNX's
// AveragePool: asymmetric pads and count_include_pad (PoolDesc), fp32 against a double oracle.
#include <cmath>

#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"
#include "tests/common/half_test_util.h"

namespace cnn::sweep {

namespace {

using test::to_bits;

struct NamedAct {
  const char* name;
  Activation a;
  float lo, hi;  // input range: wide enough to cross every kink
};
// ReLU6 as Clip(0, 6); HardSigmoid with ONNX's default and with PyTorch's (x + 3) / 6.
const NamedAct kActs[] = {
    {"leaky_relu 0.1", {ActKind::kLeakyRelu, 0.1f, 0.f}, -2.f, 2.f},
    {"clip 0 6", {ActKind::kClip, 0.f, 6.f}, -3.f, 9.f},
    {"clip -1 0.5", {ActKind::kClip, -1.f, 0.5f}, -2.f, 2.f},
    {"sigmoid", {ActKind::kSigmoid, 0.f, 0.f}, -20.f, 20.f},
    {"hard_sigmoid 0.2 0.5", {ActKind::kHardSigmoid, 0.2f, 0.5f}, -4.f, 4.f},
    {"hard_sigmoid 1/6 0.5", {ActKind::kHardSigmoid, 1.f / 6.f, 0.5f}, -5.f, 5.f},
    {"hard_swish", {ActKind::kHardSwish, 0.f, 0.f}, -5.f, 5.f},
    {"silu", {ActKind::kSilu, 0.f, 0.f}, -20.f, 20.f},
};

std::string n_str(size_t n) { return "n=" + std::to_string(n); }

// The fp32 activation cases, against the double oracle.
void add_activations() {
  uint64_t seed = 20000;
  for (const NamedAct& na : kActs)
    for (size_t n : {size_t{1}, size_t{255}, size_t{70001}}) {
      const uint64_t s = seed += 10;
      const Activation a = na.a;
      const float lo = na.lo, hi = na.hi;
      const std::string shape = std::string(na.name) + " " + n_str(n);
      add_case({"activation_forward", shape, {}, [=](Run& r) {
        float* d_y = r.garbage(n);
        float* d_x = r.upload(random_vec(n, s, lo, hi));
        r.be.activation_forward(DType::kF32, a, n, d_x, d_y);
        r.output("y", d_y, n, kDefault);
        r.be.activation_forward(DType::kF32, a, n, d_x, d_x);
        r.output("y in place", d_x, n, kDefault);
      }, [=](Run& r) {
        std::vector<double> y;
        for (float v : random_vec(n, s, lo, hi)) y.push_back(oracle::activation(a, v));
        r.output_host("y", y, kDefault);
        r.output_host("y in place", y, kDefault);
      }});
      for (bool acc : {false, true})
        add_case({"activation_backward", shape + (acc ? " accumulate" : ""), {}, [=](Run& r) {
          float* d_dx = acc ? r.upload(random_vec(n, s + 2)) : r.garbage(n);
          const float* d_x = r.upload(random_vec(n, s, lo, hi));
          r.be.activation_backward(DType::kF32, a, n, d_x, r.upload(random_vec(n, s + 1)), d_dx, acc);
          r.output("dx", d_dx, n, kDefault);
        }, [=](Run& r) {
          const auto x = random_vec(n, s, lo, hi), dy = random_vec(n, s + 1), dx0 = random_vec(n, s + 2);
          std::vector<double> dx(n);
          for (size_t i = 0; i < n; ++i) dx[i] = (acc ? dx0[i] : 0.0) + dy[i] * oracle::activation_derivative(a, x[i]);
          r.output_host("dx", dx, kDefault);
        }});
    }
}

struct MulShape {
  int n, hw, c;
};
// Squeeze-excitation maps (7x7 and 14x14, ragged channels; one sample), same-shape products (hw = 1), and a
// per-sample scale of whole samples (c = 1: stochastic depth's, src/model/join_layers.cpp).
const MulShape kMuls[] = {{2, 49, 37}, {1, 196, 96}, {3, 1, 1001}, {70001, 1, 1}, {5, 1001, 1}};

std::string mul_str(const MulShape& m) {
  return "n" + std::to_string(m.n) + " hw" + std::to_string(m.hw) + " c" + std::to_string(m.c);
}

// Concatenations: rows x channels of each input.
struct ConcatShape {
  int rows;
  std::vector<int> channels;
};
const ConcatShape kConcats[] = {{37, {3, 16, 1}}, {1, {5}}, {2 * 7 * 7, {32, 32, 32, 32, 32}}, {1001, {2, 1}}};

std::string concat_str(const ConcatShape& c) {
  std::string s = "rows " + std::to_string(c.rows) + " channels";
  for (int ch : c.channels) s += " " + std::to_string(ch);
  return s;
}

// 16-bit device copy of x rounded to t (fp32: x itself), and NaN-filled outputs of type t.
const void* up(Run& r, const std::vector<float>& x, DType t) {
  return t == DType::kF32 ? static_cast<const void*>(r.upload(x)) : r.upload(to_bits(x, t));
}
void* garbage_t(Run& r, size_t n, DType t) {
  return const_cast<void*>(up(r, std::vector<float>(n, std::nanf("")), t));
}
void output(Run& r, const std::string& name, DType t, const void* d, size_t n, Tol tol) {
  if (t == DType::kF32) return r.output(name, static_cast<const float*>(d), n, tol);
  r.output(name, t, d, n, tol);
}
// One rounding each side (fp32: kDefault) plus atol for the order of a sum.
Tol arith(DType t, double atol) { return t == DType::kF32 ? kDefault : Tol{atol, 2 * unit_roundoff(t)}; }

void add_joins(DType t) {
  const std::string ty = std::string(dtype_name(t)) + " ";
  uint64_t seed = 21000 + 1000 * static_cast<uint64_t>(t);
  for (size_t n : {size_t{1}, size_t{255}, size_t{70001}}) {
    const uint64_t s = seed += 10;
    add_case({"add_forward", ty + n_str(n), {}, [=](Run& r) {
      void* d_y = garbage_t(r, n, t);
      const void* d_a = up(r, random_vec(n, s), t);
      void* d_b = const_cast<void*>(up(r, random_vec(n, s + 1), t));
      r.be.add_forward(t, n, d_a, d_b, d_y);
      output(r, "y", t, d_y, n, arith(t, 0));
      r.be.add_forward(t, n, d_a, d_b, d_b);
      output(r, "y in place", t, d_b, n, arith(t, 0));
    }});
  }
  for (const MulShape& m : kMuls) {
    const uint64_t s = seed += 10;
    const size_t xs = static_cast<size_t>(m.n) * m.hw * m.c, ss = static_cast<size_t>(m.n) * m.c;
    add_case({"mul_forward", ty + mul_str(m), {}, [=](Run& r) {
      void* d_y = garbage_t(r, xs, t);
      void* d_x = const_cast<void*>(up(r, random_vec(xs, s), t));
      const void* d_s = up(r, random_vec(ss, s + 1), t);
      r.be.mul_forward(t, m.n, m.hw, m.c, d_x, d_s, d_y);
      output(r, "y", t, d_y, xs, arith(t, 0));
      r.be.mul_forward(t, m.n, m.hw, m.c, d_x, d_s, d_x);
      output(r, "y in place", t, d_x, xs, arith(t, 0));
    }});
    for (int variant = 0; variant < 4; ++variant) {  // both gradients, each alone, both accumulated
      const bool want_dx = variant != 2, want_ds = variant != 1, acc = variant == 3;
      const std::string what = variant == 1 ? " dx only" : variant == 2 ? " ds only" : acc ? " accumulate" : "";
      add_case({"mul_backward", ty + mul_str(m) + what, {}, [=](Run& r) {
        // Accumulated gradients start from random values, overwritten ones from NaN.
        auto grad = [&](bool want, size_t count, uint64_t sd) -> void* {
          if (!want) return nullptr;
          return acc ? const_cast<void*>(up(r, random_vec(count, sd), t)) : garbage_t(r, count, t);
        };
        void* d_dx = grad(want_dx, xs, s + 3);
        void* d_ds = grad(want_ds, ss, s + 4);
        r.be.mul_backward(t, m.n, m.hw, m.c, up(r, random_vec(xs, s), t), up(r, random_vec(ss, s + 1), t),
                          up(r, random_vec(xs, s + 2), t), d_dx, d_ds, acc);
        if (want_dx) output(r, "dx", t, d_dx, xs, arith(t, 0));
        if (want_ds) output(r, "ds", t, d_ds, ss, arith(t, 1e-5 * m.hw));  // sums over hw
      }});
    }
  }
  for (const ConcatShape& c : kConcats) {
    const uint64_t s = seed += 10;
    const int k = static_cast<int>(c.channels.size());
    int width = 0;
    for (int ch : c.channels) width += ch;
    const size_t ys = static_cast<size_t>(c.rows) * width;
    add_case({"concat_forward", ty + concat_str(c), {}, [=](Run& r) {
      std::vector<const void*> x;
      for (int i = 0; i < k; ++i) x.push_back(up(r, random_vec(static_cast<size_t>(c.rows) * c.channels[i], s + i), t));
      void* d_y = garbage_t(r, ys, t);
      r.be.concat_forward(t, c.rows, k, c.channels.data(), x.data(), d_y);
      output(r, "y", t, d_y, ys, kExact);
    }});
    for (bool acc : {false, true}) {
      const std::string shape = ty + concat_str(c) + (acc ? " accumulate" : "") + (k > 1 ? ", input 1 skipped" : "");
      add_case({"concat_backward", shape, {}, [=](Run& r) {
        std::vector<void*> dx;
        for (int i = 0; i < k; ++i) {
          const size_t n = static_cast<size_t>(c.rows) * c.channels[i];
          if (k > 1 && i == 1) dx.push_back(nullptr);  // a null gradient is skipped
          else dx.push_back(acc ? const_cast<void*>(up(r, random_vec(n, s + 20 + i), t)) : garbage_t(r, n, t));
        }
        r.be.concat_backward(t, c.rows, k, c.channels.data(), up(r, random_vec(ys, s + 10), t), dx.data(), acc);
        for (int i = 0; i < k; ++i)
          if (dx[i])
            output(r, "dx" + std::to_string(i), t, dx[i], static_cast<size_t>(c.rows) * c.channels[i],
                   acc ? arith(t, 0) : kExact);
      }});
    }
  }
}

// 16-bit activations: inputs rounded to t, against the reference op in t.
void add_activations_16(DType t) {
  const std::string ty = std::string(dtype_name(t)) + " ";
  uint64_t seed = 23000 + 1000 * static_cast<uint64_t>(t);
  for (const NamedAct& na : kActs) {
    const uint64_t s = seed += 10;
    const Activation a = na.a;
    const float lo = na.lo, hi = na.hi;
    const size_t n = 70001;
    add_case({"activation_forward", ty + na.name + " " + n_str(n), {}, [=](Run& r) {
      void* d_y = garbage_t(r, n, t);
      const void* d_x = up(r, random_vec(n, s, lo, hi), t);
      r.be.activation_forward(t, a, n, d_x, d_y);
      output(r, "y", t, d_y, n, arith(t, 1e-6));
    }});
    for (bool acc : {false, true})
      add_case({"activation_backward", ty + na.name + " " + n_str(n) + (acc ? " accumulate" : ""), {}, [=](Run& r) {
        void* d_dx = acc ? const_cast<void*>(up(r, random_vec(n, s + 2), t)) : garbage_t(r, n, t);
        r.be.activation_backward(t, a, n, up(r, random_vec(n, s, lo, hi), t), up(r, random_vec(n, s + 1), t), d_dx,
                                 acc);
        output(r, "dx", t, d_dx, n, arith(t, 1e-6));
      }});
  }
}

PoolDesc pool(int n, int h, int w, int c, int r, int stride, int pad, int extra_h, int extra_w, bool include) {
  PoolDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.r = d.s = r, d.stride = stride, d.pad = pad;
  d.extra_pad_h = extra_h, d.extra_pad_w = extra_w, d.count_include_pad = include;
  return d;
}
// ONNX's AveragePool beyond the zoo's: PyTorch's AvgPool2d(3, 1, 1) and (3, 2, 1) (count_include_pad, its
// default), asymmetric pads (ceil_mode's extra row and column) with and without it, ragged channels.
const PoolDesc kAvgPools[] = {pool(3, 8, 8, 4, 3, 1, 1, 0, 0, true), pool(2, 7, 7, 5, 3, 2, 1, 0, 0, true),
                              pool(2, 6, 7, 3, 3, 2, 0, 1, 1, false), pool(1, 5, 6, 33, 2, 2, 1, 1, 0, true),
                              pool(2, 6, 5, 7, 3, 2, 1, 0, 1, false)};

std::string pool_str(const PoolDesc& d) {
  return "n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) + " c" +
         std::to_string(d.c) + " window " + std::to_string(d.r) + " stride " + std::to_string(d.stride) + " pads " +
         std::to_string(d.pad) + "/" + std::to_string(d.pad + d.extra_pad_h) + "," +
         std::to_string(d.pad + d.extra_pad_w) + (d.count_include_pad ? " count_include_pad" : "");
}

// fp32 against the oracle (the fast CPU backend runs the reference kernel per sample); 16 bits against the
// reference in the type.
void add_avgpools(DType t) {
  const std::string ty = std::string(dtype_name(t)) + " ";
  uint64_t seed = 25000 + 1000 * static_cast<uint64_t>(t);
  for (const PoolDesc& d : kAvgPools) {
    const uint64_t s = seed += 10;
    const size_t xs = static_cast<size_t>(d.n) * d.h * d.w * d.c, ys = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
    const bool f32 = t == DType::kF32;
    add_case({"avgpool_forward", ty + pool_str(d), {}, [=](Run& r) {
      void* d_y = garbage_t(r, ys, t);
      r.be.avgpool_forward(t, d, up(r, random_vec(xs, s), t), d_y);
      output(r, "y", t, d_y, ys, arith(t, 1e-6));
    }, f32 ? std::function<void(Run&)>([=](Run& r) {
      r.output_host("y", oracle::avgpool_forward(d, random_vec(xs, s)), kDefault);
    }) : nullptr});
    add_case({"avgpool_backward", ty + pool_str(d), {}, [=](Run& r) {
      void* d_dx = garbage_t(r, xs, t);
      r.be.avgpool_backward(t, d, up(r, random_vec(ys, s + 1), t), d_dx);
      output(r, "dx", t, d_dx, xs, arith(t, 1e-6));
    }, f32 ? std::function<void(Run&)>([=](Run& r) {
      r.output_host("dx", oracle::avgpool_backward(d, random_vec(ys, s + 1)), kDefault);
    }) : nullptr});
  }
}

}  // namespace

CNN_SWEEP_CASES(graph) {
  add_avgpools(DType::kF32);
  add_activations();
  add_joins(DType::kF32);
  for (DType t : test::kHalfTypes) {
    add_activations_16(t);
    add_joins(t);
    add_avgpools(t);
  }
}

}  // namespace cnn::sweep
