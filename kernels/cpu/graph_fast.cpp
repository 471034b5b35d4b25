#include "kernels/cpu/graph_fast.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/activation.h"
#include "kernels/cpu/cpu_parallel.h"
#include "kernels/dtype.h"

namespace cnn {

namespace {

// Element-wise loops run in chunks, so that each thread's inner loop is long and vectorises.
constexpr long long kChunk = 4096;

template <class F>
void chunked(int threads, size_t n, F body) {
  const long long chunks = (static_cast<long long>(n) + kChunk - 1) / kChunk;
  parallel_for(threads, n, chunks, [&](long long b) {
    const size_t begin = static_cast<size_t>(b) * kChunk, end = std::min(n, begin + static_cast<size_t>(kChunk));
    body(begin, end);
  });
}

// exp(x) within 3 ulp (2.74 at worst over every float in [-87, 88] against exp in double; x is clamped to that
// range, where float stays normal), branch-free so that the loops around it vectorise; libm's expf is a call
// per element (g++ vectorises it only under -ffast-math). Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2,
// and exp(r) by its Taylor polynomial to r^6 (error under r^7/7!).
inline float exp_vec(float x) {
  x = x < -87.f ? -87.f : x > 88.f ? 88.f : x;
  constexpr float kShift = 12582912.f;  // 1.5 * 2^23: adding it rounds x/ln2 to an integer in the low bits
  const float t = x * 1.44269504f + kShift, n = t - kShift;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;  // ln2 split in a high part exact in n*ln2_hi
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  int32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  const int32_t scale_bits = (bits - 0x4B400000 + 127) << 23;  // 2^n: t's low mantissa bits hold n
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

// act_value and act_derivative, with exp_vec in the sigmoid's (the kinds with an exponential).
template <ActKind K>
inline float value_vec(float x, float alpha, float beta) {
  if constexpr (K == ActKind::kSigmoid) return 1.f / (1.f + exp_vec(-x));
  if constexpr (K == ActKind::kSilu) return x / (1.f + exp_vec(-x));
  return act_value<K>(x, alpha, beta);
}
template <ActKind K>
inline float derivative_vec(float x, float alpha, float beta) {
  if constexpr (K == ActKind::kSigmoid || K == ActKind::kSilu) {
    const float s = 1.f / (1.f + exp_vec(-x));
    return K == ActKind::kSigmoid ? s * (1.f - s) : s * (1.f + x * (1.f - s));
  }
  return act_derivative<K>(x, alpha, beta);
}

}  // namespace

void activation_forward_fast(int threads, const Activation& a, size_t n, const float* x, float* y) {
  act_dispatch(a.kind, [&](auto tag) {
    constexpr ActKind K = decltype(tag)::kind;
    const float alpha = a.alpha, beta = a.beta;
    chunked(threads, n, [=](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) y[i] = value_vec<K>(x[i], alpha, beta);
    });
  });
}

void activation_backward_fast(int threads, const Activation& a, size_t n, const float* x, const float* dy, float* dx,
                              bool accumulate) {
  act_dispatch(a.kind, [&](auto tag) {
    constexpr ActKind K = decltype(tag)::kind;
    const float alpha = a.alpha, beta = a.beta;
    chunked(threads, n, [=](size_t begin, size_t end) {
      if (accumulate)
        for (size_t i = begin; i < end; ++i) dx[i] += dy[i] * derivative_vec<K>(x[i], alpha, beta);
      else
        for (size_t i = begin; i < end; ++i) dx[i] = dy[i] * derivative_vec<K>(x[i], alpha, beta);
    });
  });
}

void add_forward_fast(int threads, size_t n, const float* a, const float* b, float* y) {
  chunked(threads, n, [=](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
  });
}

void mul_forward_fast(int threads, int n, int hw, int c, const float* x, const float* s, float* y) {
  const size_t total = static_cast<size_t>(n) * hw * c;
  parallel_for(threads, total, static_cast<long long>(n) * hw, [=](long long row) {
    const float* si = s + row / hw * c;
    const size_t o = static_cast<size_t>(row) * c;
    for (int k = 0; k < c; ++k) y[o + k] = x[o + k] * si[k];
  });
}

namespace {

// Channels per task of the channel sums: a block of running sums stays in registers across the hw loop.
constexpr int kSumBlock = 64;

// ds[i, k0 + (0..width)] (+)= sum over j of dy * x, j increasing (the reference's order).
void mul_channel_sums(int hw, int c, int i, int k0, int width, const float* __restrict x,
                      const float* __restrict dy, float* __restrict ds, bool accumulate) {
  float sum[kSumBlock] = {};
  for (int j = 0; j < hw; ++j) {
    const size_t o = (static_cast<size_t>(i) * hw + j) * c + k0;
    for (int k = 0; k < width; ++k) sum[k] += dy[o + k] * x[o + k];
  }
  float* out = ds + static_cast<size_t>(i) * c + k0;
  for (int k = 0; k < width; ++k) out[k] = accumulate ? out[k] + sum[k] : sum[k];
}

}  // namespace

void mul_backward_fast(int threads, int n, int hw, int c, const float* x, const float* s, const float* dy, float* dx,
                       float* ds, bool accumulate) {
  const size_t total = static_cast<size_t>(n) * hw * c;
  if (dx)
    parallel_for(threads, total, static_cast<long long>(n) * hw, [=](long long row) {
      const float* si = s + row / hw * c;
      const size_t o = static_cast<size_t>(row) * c;
      if (accumulate)
        for (int k = 0; k < c; ++k) dx[o + k] += dy[o + k] * si[k];
      else
        for (int k = 0; k < c; ++k) dx[o + k] = dy[o + k] * si[k];
    });
  if (!ds) return;
  const int blocks = (c + kSumBlock - 1) / kSumBlock;
  parallel_for(threads, 2 * total, static_cast<long long>(n) * blocks, [=](long long task) {
    const int i = static_cast<int>(task / blocks), k0 = static_cast<int>(task % blocks) * kSumBlock;
    mul_channel_sums(hw, c, i, k0, std::min(kSumBlock, c - k0), x, dy, ds, accumulate);
  });
}

namespace {

// Channel offsets of the inputs and the output's row width.
int offsets(int k, const int* channels, int* offset) {
  int total = 0;
  for (int i = 0; i < k; ++i) {
    offset[i] = total;
    total += channels[i];
  }
  return total;
}

template <class T>
void concat_rows(int threads, int rows, int k, const int* channels, const void* const* x, void* y) {
  std::vector<int> offset(k);
  const int width = offsets(k, channels, offset.data());
  T* yt = static_cast<T*>(y);
  parallel_for(threads, static_cast<size_t>(rows) * width, rows, [&](long long r) {
    for (int i = 0; i < k; ++i) {  // a loop, not memcpy: rows of a few dozen channels copy faster inline
      const T* __restrict xi = static_cast<const T*>(x[i]) + r * channels[i];
      T* __restrict yi = yt + r * width + offset[i];
      for (int j = 0; j < channels[i]; ++j) yi[j] = xi[j];
    }
  });
}

template <class T>
void split_rows(int threads, int rows, int k, const int* channels, const void* dy, void* const* dx, bool accumulate) {
  std::vector<int> offset(k);
  const int width = offsets(k, channels, offset.data());
  const T* dyt = static_cast<const T*>(dy);
  parallel_for(threads, static_cast<size_t>(rows) * width, rows, [&](long long r) {
    for (int i = 0; i < k; ++i) {
      if (!dx[i]) continue;
      const T* g = dyt + r * width + offset[i];
      T* d = static_cast<T*>(dx[i]) + r * channels[i];
      if (accumulate)
        for (int j = 0; j < channels[i]; ++j) d[j] = from_float<T>(to_float(d[j]) + to_float(g[j]));
      else
        for (int j = 0; j < channels[i]; ++j) d[j] = g[j];
    }
  });
}

template <class F>
void by_type(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f(static_cast<float*>(nullptr));
    case DType::kBF16: return f(static_cast<Bf16*>(nullptr));
    case DType::kF16: return f(static_cast<F16*>(nullptr));
  }
}

}  // namespace

void concat_forward_fast(int threads, DType t, int rows, int k, const int* channels, const void* const* x, void* y) {
  by_type(t, [&](auto* tag) {
    concat_rows<std::remove_pointer_t<decltype(tag)>>(threads, rows, k, channels, x, y);
  });
}

void concat_backward_fast(int threads, DType t, int rows, int k, const int* channels, const void* dy,
                          void* const* dx, bool accumulate) {
  by_type(t, [&](auto* tag) {
    split_rows<std::remove_pointer_t<decltype(tag)>>(threads, rows, k, channels, dy, dx, accumulate);
  });
}

}  // namespace cnn
