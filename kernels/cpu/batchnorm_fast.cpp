// Batch normalisation of the fast CPU backend: same semantics as kernels/batchnorm.h (the reference), NHWC
// [rows, c], multithreaded and vectorised, with the residual add and the ReLU fused into its passes. It is
// memory-bound (a ResNet-20 activation at batch 128 is 8 MB: more than L2, and with a few of them more than
// L3), so the passes are arranged to stream as little as possible:
//   forward (training): x for the statistics, then x (+ residual) -> y and the ReLU's bit mask;
//   backward: x, dy and the mask for the two per-channel sums, then x, dy, mask -> dx (+ residual gradient).
// Reductions run over fixed chunks that depend only on (rows, c); each chunk's sums land in its own slot
// and the slots are added in chunk order, so results are the same for any thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/backend.h"
#include "kernels/batchnorm_finalize.h"
#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/fast_cpu.h"
#include "kernels/cpu/simd8.h"
#include "kernels/dtype.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ReLU mask is written byte by byte");

namespace cnn {

namespace {

// The ReLU mask byte of eight consecutive elements is one movemask (positive_bits8).
inline bool mask_bit(const uint8_t* m, size_t i) { return m[i / 8] >> (i % 8) & 1u; }

// The tensor is a flat array of n = rows*c elements cut into chunks; inside a chunk, element i sits in lane
// (i - chunk start) % lanes, and lane l holds channel l % c. lanes is a multiple of c and of 8 and >= 64:
// eight-element groups never straddle a lane wrap, and small channel counts still give every accumulator
// lane an independent add chain (16 channels = two AVX2 registers would wait on the add latency).
constexpr int kMinLanes = 64;
constexpr size_t kChunkElems = 1 << 15;
constexpr long long kMaxChunks = 64;
constexpr int kFlushPasses = 64;  // float lane sums move into double every this many passes over the lanes

struct Layout {
  size_t n = 0;
  int c = 0, lanes = 0;
  size_t chunk = 0;  // elements per chunk: a multiple of lanes and of 32 (chunks own whole mask words)
  long long chunks = 0;
};

Layout layout_of(int rows, int c) {
  Layout L;
  L.n = static_cast<size_t>(rows) * c;
  L.c = c;
  size_t lanes = std::lcm<size_t>(c, 8);
  while (lanes < kMinLanes) lanes *= 2;
  L.lanes = static_cast<int>(lanes);
  const size_t unit = std::lcm<size_t>(lanes, 32);
  const size_t want = std::max<size_t>(kChunkElems, (L.n + kMaxChunks - 1) / kMaxChunks);
  L.chunk = (want + unit - 1) / unit * unit;
  L.chunks = static_cast<long long>((L.n + L.chunk - 1) / L.chunk);
  return L;
}

// Scratch reused across calls (no allocation once the largest shape has been seen). `main` belongs to the
// calling thread (the backend's ops run on one thread); `lane` to each OpenMP worker.
struct Scratch {
  std::vector<double> partial;      // [chunks][2c]
  std::vector<float> w0, w1, w2, w3;  // per-lane constants, `lanes` long
  std::vector<double> sum_a, sum_b, v0, v1, v2;  // per channel
};
Scratch& main_scratch() {
  thread_local Scratch s;
  return s;
}
struct LaneSums {
  std::vector<float> fa, fb;
  std::vector<double> da, db;
};
LaneSums& lane_sums(int lanes) {
  thread_local LaneSums s;
  s.fa.assign(lanes, 0.f);
  s.fb.assign(lanes, 0.f);
  s.da.assign(lanes, 0.0);
  s.db.assign(lanes, 0.0);
  return s;
}

// Per-lane copy of per-channel values.
const float* widen(const Layout& L, const std::vector<double>& v, std::vector<float>& out) {
  out.resize(L.lanes);
  for (int l = 0; l < L.lanes; ++l) out[l] = static_cast<float>(v[l % L.c]);
  return out.data();
}

// Calls group(i, l) for each eight-element group [i, i+8) of chunk q (lane l), pass(k) after the k-th full
// pass over the lanes, and tail(i, l) for each element of a last partial group (only at the end of the
// tensor). The chunk is walked in memory order (blocking wide rows by lanes defeats the prefetchers: 2.5x
// slower at 1024 channels).
template <class Group, class Pass, class Tail>
void for_chunk(const Layout& L, long long q, Group group, Pass pass, Tail tail) {
  const size_t b = static_cast<size_t>(q) * L.chunk, e = std::min(L.n, b + L.chunk);
  const size_t lanes = L.lanes;
  size_t i = b;
  for (long k = 1; i + lanes <= e; i += lanes, ++k) {
    for (size_t l = 0; l < lanes; l += 8) group(i + l, static_cast<int>(l));
    pass(k);
  }
  size_t l = 0;
  for (; i + l + 8 <= e; l += 8) group(i + l, static_cast<int>(l));
  for (; i + l < e; ++l) tail(i + l, static_cast<int>(l));
}

// Per-channel sums sum_a, sum_b (double) of two per-element terms. term8(i, l) -> (a, b) for a group,
// term1(i, l, a, b) for a single element.
template <class Term8, class Term1>
void channel_sums(int threads, const Layout& L, Term8 term8, Term1 term1, Scratch& s) {
  const size_t c = L.c;
  s.partial.assign(static_cast<size_t>(L.chunks) * 2 * c, 0.0);
  double* partial = s.partial.data();
  parallel_for(threads, L.n, L.chunks, [&](long long q) {
    LaneSums& ls = lane_sums(L.lanes);
    float *fa = ls.fa.data(), *fb = ls.fb.data();
    double *da = ls.da.data(), *db = ls.db.data();
    auto flush = [&] {
      for (int l = 0; l < L.lanes; ++l) {
        da[l] += fa[l];
        db[l] += fb[l];
        fa[l] = fb[l] = 0.f;
      }
    };
    double* out = partial + q * 2 * c;
    // The hot lambdas capture by value: through a reference every store could alias the captured pointers,
    // which the compiler then reloads in the inner loop.
    for_chunk(
        L, q,
        [=](size_t i, int l) {
          V8 a, b;
          term8(i, l, a, b);
          store8(fa + l, add8(load8(fa + l), a));
          store8(fb + l, add8(load8(fb + l), b));
        },
        [&](long k) {
          if (k % kFlushPasses == 0) flush();
        },
        [&](size_t i, int l) {
          float a, b;
          term1(i, l, a, b);
          out[l % c] += a;
          out[c + l % c] += b;
        });
    flush();
    for (size_t g = 0; g < static_cast<size_t>(L.lanes); g += c)
      for (size_t j = 0; j < c; ++j) {
        out[j] += da[g + j];
        out[c + j] += db[g + j];
      }
  });
  add_chunk_slots(s.partial, L.chunks, c, s.sum_a, s.sum_b);
}

// y = act(x * scale + shift + residual) (per-lane scale/shift); the ReLU's mask bytes when mask is not null.
// Walks each chunk in memory order like for_chunk, four groups at a time: their 32 mask bits are one store (chunks
// start on mask words) where a byte per group made the pass store-bound (8 MB at 16 channels, 2 threads:
// 0.44 ms with byte stores, 0.35 ms with words, 0.33 ms with no mask; docs/perf.md, fifteenth pass).
template <class T, bool kResidual, bool kRelu, bool kCapped>
void apply_chunks(int threads, const Layout& L, const T* x, const T* residual, const float* scale,
                  const float* shift, float cap, T* y, uint8_t* mask) {
  const V8 cap8 = broadcast8(cap);
  auto group = [=](size_t i, size_t l, unsigned* bits) {
    V8 v = fma8(load8(x + i), load8(scale + l), load8(shift + l));
    if (kResidual) v = add8(v, load8(residual + i));
    if (kRelu) {
      *bits = positive_bits8(v);
      v = relu8(v);
      if (kCapped) {
        *bits &= below_bits8(v, cap8);
        v = min8(v, cap8);
      }
    }
    store8(y + i, v);
  };
  parallel_for(threads, L.n, L.chunks, [&](long long q) {
    const size_t b = static_cast<size_t>(q) * L.chunk, e = std::min(L.n, b + L.chunk);
    const size_t lanes = L.lanes;
    size_t i = b, l = 0;
    for (; i + 32 <= e; i += 32) {
      uint32_t word = 0;
      for (int k = 0; k < 4; ++k) {
        unsigned bits = 0;
        group(i + 8 * k, l, &bits);
        word |= static_cast<uint32_t>(bits) << (8 * k);
        l = l + 8 == lanes ? 0 : l + 8;
      }
      if (kRelu && mask) std::memcpy(mask + i / 8, &word, sizeof word);
    }
    for (; i + 8 <= e; i += 8) {
      unsigned bits = 0;
      group(i, l, &bits);
      if (kRelu && mask) mask[i / 8] = static_cast<uint8_t>(bits);
      l = l + 8 == lanes ? 0 : l + 8;
    }
    for (; i < e; ++i, l = l + 1 == lanes ? 0 : l + 1) {
      float v = std::fma(to_float(x[i]), scale[l], shift[l]);
      if (kResidual) v += to_float(residual[i]);
      if (kRelu) {
        v = v > 0.f ? v : 0.f;
        const bool pass = v > 0.f && !(kCapped && v >= cap);
        if (kCapped && v >= cap) v = cap;
        if (mask) {
          const uint8_t bit = static_cast<uint8_t>(1u << (i % 8));
          mask[i / 8] = static_cast<uint8_t>(pass ? mask[i / 8] | bit : mask[i / 8] & ~bit);
        }
      }
      y[i] = from_float<T>(v);
    }
  });
}

template <class T, bool kResidual>
void apply_act(int threads, const Layout& L, const T* x, const T* residual, BnAct act, const float* scale,
               const float* shift, T* y, uint8_t* mask) {
  if (act.capped)
    apply_chunks<T, kResidual, true, true>(threads, L, x, residual, scale, shift, act.cap, y, mask);
  else if (act.relu)
    apply_chunks<T, kResidual, true, false>(threads, L, x, residual, scale, shift, 0.f, y, mask);
  else
    apply_chunks<T, kResidual, false, false>(threads, L, x, residual, scale, shift, 0.f, y, mask);
}

template <class T>
void apply(int threads, const Layout& L, const T* x, const T* residual, BnAct act, const float* scale,
           const float* shift, T* y, uint8_t* mask) {
  CNN_CHECK(act.relu || !act.capped, "batch norm: a capped activation without its ReLU");
  if (residual)
    apply_act<T, true>(threads, L, x, residual, act, scale, shift, y, mask);
  else
    apply_act<T, false>(threads, L, x, residual, act, scale, shift, y, mask);
}

// dx = A*g + C*(x - mean) + B with g = dy masked by the ReLU (per-lane constants); dresidual = g.
template <class T, bool kRelu, bool kDx, bool kDres>
void backward_chunks(int threads, const Layout& L, const T* x, const uint8_t* mask, const T* dy,
                     const float* mean, const float* ka, const float* kb, const float* kc, T* dx, T* dres) {
  parallel_for(threads, L.n, L.chunks, [&](long long q) {
    for_chunk(
        L, q,
        [=](size_t i, int l) {
          V8 g = load8(dy + i);
          if (kRelu) g = select8(mask[i / 8], g);
          if (kDx) store8(dx + i, fma8(load8(ka + l), g, fma8(load8(kc + l), sub8(load8(x + i), load8(mean + l)),
                                                              load8(kb + l))));
          if (kDres) store8(dres + i, g);
        },
        [](long) {},
        [&](size_t i, int l) {
          const float g = kRelu && !mask_bit(mask, i) ? 0.f : to_float(dy[i]);
          if (kDx) dx[i] = from_float<T>(std::fma(ka[l], g, std::fma(kc[l], to_float(x[i]) - mean[l], kb[l])));
          if (kDres) dres[i] = from_float<T>(g);
        });
  });
}

template <bool kRelu, class T>
void backward_data(int threads, const Layout& L, const T* x, const uint8_t* mask, const T* dy,
                   const float* mean, const float* ka, const float* kb, const float* kc, T* dx, T* dres) {
  if (dx && dres) backward_chunks<T, kRelu, true, true>(threads, L, x, mask, dy, mean, ka, kb, kc, dx, dres);
  else if (dx) backward_chunks<T, kRelu, true, false>(threads, L, x, mask, dy, mean, ka, kb, kc, dx, dres);
  else if (dres) backward_chunks<T, kRelu, false, true>(threads, L, x, mask, dy, mean, ka, kb, kc, dx, dres);
}

template <class T>
void forward_train(int threads, int rows, int c, const T* x, const T* residual, const float* gamma,
                   const float* beta, float eps, float momentum, BnAct act, T* y, uint32_t* relu_mask,
                   float* save_mean, float* save_invstd, float* running_mean, float* running_var) {
  if (rows <= 0 || c <= 0) return;
  const Layout L = layout_of(rows, c);
  Scratch& s = main_scratch();
  // Sums of (x - k) and (x - k)^2 with k the mean of the first rows: close to the channel mean, so the
  // one-pass variance S2/n - (S1/n)^2 keeps its precision (the reference takes two passes in double).
  std::vector<double>& shift = s.v0;
  shift.assign(c, 0.0);
  const int head = std::min(rows, 8);
  for (int r = 0; r < head; ++r)
    for (int j = 0; j < c; ++j) shift[j] += to_float(x[static_cast<size_t>(r) * c + j]);
  for (int j = 0; j < c; ++j) shift[j] = static_cast<float>(shift[j] / head);
  const float* k = widen(L, shift, s.w0);
  channel_sums(
      threads, L,
      [=](size_t i, int l, V8& a, V8& b) {
        const V8 d = sub8(load8(x + i), load8(k + l));
        a = d;
        b = fma8(d, d, zero8());
      },
      [=](size_t i, int l, float& a, float& b) {
        const float d = to_float(x[i]) - k[l];
        a = d;
        b = std::fma(d, d, 0.f);
      },
      s);
  std::vector<double>& scale = s.v1;
  std::vector<double>& sh = s.v2;
  scale.resize(c);
  sh.resize(c);
  for (int j = 0; j < c; ++j) {
    const double m1 = s.sum_a[j] / rows;  // mean and variance of the shifted values
    float sc, sf;
    batchnorm_finalize(rows, shift[j] + m1, s.sum_b[j] / rows - m1 * m1, gamma[j], beta[j], eps, momentum,
                       &save_mean[j], &save_invstd[j], &running_mean[j], &running_var[j], &sc, &sf);
    scale[j] = sc;
    sh[j] = sf;
  }
  apply(threads, L, x, residual, act, widen(L, scale, s.w1), widen(L, sh, s.w2), y,
        act.relu ? reinterpret_cast<uint8_t*>(relu_mask) : nullptr);
}

template <class T>
void forward_infer(int threads, int rows, int c, const T* x, const T* residual, const float* gamma,
                   const float* beta, const float* running_mean, const float* running_var, float eps, BnAct act,
                   T* y) {
  if (rows <= 0 || c <= 0) return;
  const Layout L = layout_of(rows, c);
  Scratch& s = main_scratch();
  std::vector<double>& scale = s.v1;
  std::vector<double>& sh = s.v2;
  scale.resize(c);
  sh.resize(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[j]) + eps);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    sh[j] = static_cast<float>(beta[j] - running_mean[j] * gamma[j] * invstd);
  }
  apply(threads, L, x, residual, act, widen(L, scale, s.w1), widen(L, sh, s.w2), y, nullptr);
}

template <class T>
void backward(int threads, int rows, int c, const T* x, const uint32_t* relu_mask, const T* dy, const float* gamma,
              const float* save_mean, const float* save_invstd, T* dx, T* dresidual, float* dgamma, float* dbeta) {
  if (rows <= 0 || c <= 0) return;
  const Layout L = layout_of(rows, c);
  Scratch& s = main_scratch();
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(relu_mask);
  s.v0.assign(save_mean, save_mean + c);
  const float* m = widen(L, s.v0, s.w0);
  // Sums of g and g * (x - mean); g * xhat = invstd * the latter.
  if (mask)
    channel_sums(
        threads, L,
        [=](size_t i, int l, V8& a, V8& b) {
          a = select8(mask[i / 8], load8(dy + i));
          b = fma8(a, sub8(load8(x + i), load8(m + l)), zero8());
        },
        [=](size_t i, int l, float& a, float& b) {
          a = mask_bit(mask, i) ? to_float(dy[i]) : 0.f;
          b = std::fma(a, to_float(x[i]) - m[l], 0.f);
        },
        s);
  else
    channel_sums(
        threads, L,
        [=](size_t i, int l, V8& a, V8& b) {
          a = load8(dy + i);
          b = fma8(a, sub8(load8(x + i), load8(m + l)), zero8());
        },
        [=](size_t i, int l, float& a, float& b) {
          a = to_float(dy[i]);
          b = std::fma(a, to_float(x[i]) - m[l], 0.f);
        },
        s);
  std::vector<double>& ka = s.v0;  // the mean is in w0 already
  std::vector<double>& kb = s.v1;
  std::vector<double>& kc = s.v2;
  ka.resize(c);
  kb.resize(c);
  kc.resize(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = save_invstd[j], sg = s.sum_a[j], sgx = s.sum_b[j] * invstd;
    dgamma[j] += static_cast<float>(sgx);
    dbeta[j] += static_cast<float>(sg);
    // dx = k (g - mean(g) - xhat mean(g xhat)), k = gamma invstd, xhat = (x - mean) invstd
    const double k = static_cast<double>(gamma[j]) * invstd;
    ka[j] = k;
    kb[j] = -k * sg / rows;
    kc[j] = -k * invstd * sgx / rows;
  }
  if (!dx && !dresidual) return;
  const float *wa = widen(L, ka, s.w1), *wb = widen(L, kb, s.w2), *wc = widen(L, kc, s.w3);
  if (mask)
    backward_data<true>(threads, L, x, mask, dy, m, wa, wb, wc, dx, dresidual);
  else
    backward_data<false>(threads, L, x, mask, dy, m, wa, wb, wc, dx, dresidual);
}

}  // namespace

#define CNN_BATCHNORM_FAST(T)                                                                                    \
  void batchnorm_forward_train_fast(int threads, int rows, int c, const T* x, const T* residual,                 \
                                    const float* gamma, const float* beta, float eps, float momentum, BnAct act, \
                                    T* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,             \
                                    float* running_mean, float* running_var) {                                   \
    forward_train(threads, rows, c, x, residual, gamma, beta, eps, momentum, act, y, relu_mask, save_mean,       \
                  save_invstd, running_mean, running_var);                                                       \
  }                                                                                                              \
  void batchnorm_forward_infer_fast(int threads, int rows, int c, const T* x, const T* residual,                 \
                                    const float* gamma, const float* beta, const float* running_mean,            \
                                    const float* running_var, float eps, BnAct act, T* y) {                      \
    forward_infer(threads, rows, c, x, residual, gamma, beta, running_mean, running_var, eps, act, y);           \
  }                                                                                                              \
  void batchnorm_backward_fast(int threads, int rows, int c, const T* x, const uint32_t* relu_mask, const T* dy, \
                               const float* gamma, const float* save_mean, const float* save_invstd, T* dx,      \
                               T* dresidual, float* dgamma, float* dbeta) {                                      \
    backward(threads, rows, c, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual, dgamma, dbeta);   \
  }
CNN_BATCHNORM_FAST(float)
CNN_BATCHNORM_FAST(Bf16)
#undef CNN_BATCHNORM_FAST

}  // namespace cnn
