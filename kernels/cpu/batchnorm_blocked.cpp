// Batch normalisation of the fast CPU backend over activations [n, hw, c] whose operands each have their own
// layout (BnShape: NHWC or oneDNN's nChw16c), so that a residual block's inner tensors stay in the layout of
// the Winograd convolutions. Same semantics, passes and determinism as kernels/cpu/batchnorm_fast.cpp (read
// its comments), which does the work when all three layouts are NHWC.
//
// In both layouts the 16 channels 16*cb..16*cb+15 of one pixel are 16 contiguous floats, a segment. The passes
// walk segments in nChw16c order (sample i, channel block cb, pixel p), segment s = (i*(c/16) + cb)*hw + p:
// a blocked operand streams, an NHWC one is read 64 bytes at a stride of c floats, each through its own
// Strides. Statistics accumulate over runs of pixels of one plane (i, cb), all in the same 16 channels, in
// registers (float), added into the chunk's double sums every kFlushPixels pixels.
//
// The ReLU mask, opaque state from batchnorm_forward_train_layout to batchnorm_backward_layout with the same
// BnShape: when a layout is nChw16c, bit k of it (word k/32, bit k%32) is the element at nChw16c index k, i.e.
// byte 2s+h holds channels 8h..8h+7 of segment s. Chunks own an even number of segments, so no two threads
// write the same word. When all layouts are NHWC it is batchnorm_forward_train_fast's mask (bit = NHWC index).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernels/batchnorm_finalize.h"
#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/fast_cpu.h"
#include "kernels/cpu/simd8.h"
#include "src/base/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ReLU mask is written byte by byte");

namespace cnn {

namespace {

constexpr int kSeg = 16;                // channels per block (nChw16c)
constexpr size_t kChunkSegs = 2048;     // 32768 elements, batchnorm_fast.cpp's chunk
constexpr long long kMaxChunks = 64;
constexpr int kFlushPixels = 64;        // each float accumulator takes 32 adds before they move into double

bool all_nhwc(const BnShape& s) {
  return s.x == ActLayout::kNHWC && s.y == ActLayout::kNHWC && s.residual == ActLayout::kNHWC;
}

// Segment (i, cb, p) of an operand starts at element i*sample + cb*block + p*pixel.
struct Strides {
  size_t sample = 0, block = 0, pixel = 0;
  size_t at(int i, int cb, int p) const { return i * sample + cb * block + p * pixel; }
};

Strides strides_of(const BnShape& s, ActLayout l) {
  const size_t hw = s.hw, c = s.c;
  return l == ActLayout::kNHWC ? Strides{hw * c, kSeg, c} : Strides{hw * c, hw * kSeg, kSeg};
}

struct Plan {
  int hw = 0, blocks = 0, c = 0;
  size_t segs = 0, chunk = 0;  // segments in all and per chunk (even: a chunk owns whole mask words)
  long long chunks = 0;
  Strides x, y, r;  // x and dx, y and dy, the residual and its gradient
};

Plan plan_of(const BnShape& s) {
  Plan P;
  P.hw = s.hw;
  P.c = s.c;
  P.blocks = s.c / kSeg;
  P.segs = s.rows() * P.blocks;
  const size_t want = std::max<size_t>(kChunkSegs, (P.segs + kMaxChunks - 1) / kMaxChunks);
  P.chunk = (want + 1) / 2 * 2;
  P.chunks = static_cast<long long>((P.segs + P.chunk - 1) / P.chunk);
  P.x = strides_of(s, s.x);
  P.y = strides_of(s, s.y);
  P.r = strides_of(s, s.residual);
  return P;
}

// Calls piece(i, cb, p0, p1, s0) for each run of pixels [p0, p1) of plane (i, cb) in chunk q, in segment
// order; s0 is the segment of (i, cb, p0).
template <class Piece>
void for_pieces(const Plan& P, long long q, Piece piece) {
  size_t s = static_cast<size_t>(q) * P.chunk;
  const size_t e = std::min(P.segs, s + P.chunk);
  while (s < e) {
    const size_t plane = s / P.hw;
    const int p0 = static_cast<int>(s % P.hw);
    const int p1 = static_cast<int>(std::min<size_t>(P.hw, p0 + (e - s)));
    piece(static_cast<int>(plane / P.blocks), static_cast<int>(plane % P.blocks), p0, p1, s);
    s += p1 - p0;
  }
}

// Scratch reused across calls, owned by the calling thread (the backend's ops run on one thread).
struct Scratch {
  std::vector<double> partial;  // [chunks][2c]
  std::vector<double> sum_a, sum_b, shift;
  std::vector<float> k, scale, sh, ka, kb, kc;  // per channel
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Adds sum(term a) and sum(term b) over pixels [j0, j1) of one piece into oa[0, 16) and ob[0, 16); term(j, h,
// a, b) gives half h (channels 8h..8h+7) of pixel j. Even and odd pixels have their own accumulators: four
// independent add chains per sum.
template <class Term>
void accumulate(const Term& term, int j0, int j1, double* oa, double* ob) {
  V8 a[4] = {zero8(), zero8(), zero8(), zero8()}, b[4] = {zero8(), zero8(), zero8(), zero8()};
  int j = j0;
  for (; j + 2 <= j1; j += 2)
    for (int k = 0; k < 4; ++k) {
      V8 ta, tb;
      term(j + k / 2, k % 2, ta, tb);
      a[k] = add8(a[k], ta);
      b[k] = add8(b[k], tb);
    }
  for (int k = 0; j < j1 && k < 2; ++k) {
    V8 ta, tb;
    term(j, k, ta, tb);
    a[k] = add8(a[k], ta);
    b[k] = add8(b[k], tb);
  }
  float fa[4 * 8], fb[4 * 8];
  for (int k = 0; k < 4; ++k) {
    store8(fa + 8 * k, a[k]);
    store8(fb + 8 * k, b[k]);
  }
  for (int l = 0; l < kSeg; ++l) {
    oa[l] += static_cast<double>(fa[l]) + fa[kSeg + l];
    ob[l] += static_cast<double>(fb[l]) + fb[kSeg + l];
  }
}

// Per-channel sums s.sum_a, s.sum_b (double) of two per-element terms; make(i, cb, p0) returns the term of the
// piece starting at (i, cb, p0) (see accumulate), with j counted from p0.
template <class MakeTerm>
void channel_sums(int threads, const Plan& P, MakeTerm make, Scratch& s) {
  const size_t c = P.c;
  s.partial.assign(static_cast<size_t>(P.chunks) * 2 * c, 0.0);
  double* partial = s.partial.data();
  parallel_for(threads, P.segs * kSeg, P.chunks, [&](long long q) {
    double* out = partial + q * 2 * c;
    for_pieces(P, q, [=](int i, int cb, int p0, int p1, size_t) {
      const auto term = make(i, cb, p0);
      for (int j = 0; j < p1 - p0; j += kFlushPixels)
        accumulate(term, j, std::min(p1 - p0, j + kFlushPixels), out + cb * kSeg, out + c + cb * kSeg);
    });
  });
  add_chunk_slots(s.partial, P.chunks, c, s.sum_a, s.sum_b);
}

// y = act(x * scale + shift + residual) (per-channel scale/shift); with a mask, byte 2s + h of it holds the
// ReLU's bits of half h of segment s.
template <bool kResidual, bool kRelu, bool kCapped>
void apply_pieces(int threads, const Plan& P, const float* x, const float* residual, const float* scale,
                  const float* shift, float cap, float* y, uint8_t* mask) {
  const V8 cap8 = broadcast8(cap);
  parallel_for(threads, P.segs * kSeg, P.chunks, [&](long long q) {
    for_pieces(P, q, [=](int i, int cb, int p0, int p1, size_t s0) {
      const float* xp = x + P.x.at(i, cb, p0);
      const float* rp = kResidual ? residual + P.r.at(i, cb, p0) : nullptr;
      float* yp = y + P.y.at(i, cb, p0);
      const size_t xs = P.x.pixel, rs = P.r.pixel, ys = P.y.pixel;
      const V8 sc[2] = {load8(scale + cb * kSeg), load8(scale + cb * kSeg + 8)};
      const V8 sf[2] = {load8(shift + cb * kSeg), load8(shift + cb * kSeg + 8)};
      for (int j = 0; j < p1 - p0; ++j)
        for (int h = 0; h < 2; ++h) {
          V8 v = fma8(load8(xp + j * xs + 8 * h), sc[h], sf[h]);
          if (kResidual) v = add8(v, load8(rp + j * rs + 8 * h));
          if (kRelu) {
            unsigned bits = positive_bits8(v);
            v = relu8(v);
            if (kCapped) {
              bits &= below_bits8(v, cap8);
              v = min8(v, cap8);
            }
            if (mask) mask[2 * (s0 + j) + h] = static_cast<uint8_t>(bits);
          }
          store8(yp + j * ys + 8 * h, v);
        }
    });
  });
}

template <bool kResidual>
void apply_act(int threads, const Plan& P, const float* x, const float* residual, BnAct act, const float* scale,
               const float* shift, float* y, uint8_t* mask) {
  if (act.capped)
    apply_pieces<kResidual, true, true>(threads, P, x, residual, scale, shift, act.cap, y, mask);
  else if (act.relu)
    apply_pieces<kResidual, true, false>(threads, P, x, residual, scale, shift, 0.f, y, mask);
  else
    apply_pieces<kResidual, false, false>(threads, P, x, residual, scale, shift, 0.f, y, mask);
}

void apply(int threads, const Plan& P, const float* x, const float* residual, BnAct act, const float* scale,
           const float* shift, float* y, uint8_t* mask) {
  CNN_CHECK(act.relu || !act.capped, "batch norm: a capped activation without its ReLU");
  if (residual)
    apply_act<true>(threads, P, x, residual, act, scale, shift, y, mask);
  else
    apply_act<false>(threads, P, x, residual, act, scale, shift, y, mask);
}

// dx = A*g + C*(x - mean) + B with g = dy masked by the ReLU (per-channel constants); dresidual = g.
template <bool kRelu, bool kDx, bool kDres>
void backward_pieces(int threads, const Plan& P, const float* x, const uint8_t* mask, const float* dy,
                     const float* mean, const float* ka, const float* kb, const float* kc, float* dx, float* dres) {
  parallel_for(threads, P.segs * kSeg, P.chunks, [&](long long q) {
    for_pieces(P, q, [=](int i, int cb, int p0, int p1, size_t s0) {
      const float* xp = x + P.x.at(i, cb, p0);
      const float* gp = dy + P.y.at(i, cb, p0);
      float* dxp = kDx ? dx + P.x.at(i, cb, p0) : nullptr;
      float* drp = kDres ? dres + P.r.at(i, cb, p0) : nullptr;
      const size_t xs = P.x.pixel, gs = P.y.pixel, rs = P.r.pixel;
      const int o = cb * kSeg;
      const V8 m[2] = {load8(mean + o), load8(mean + o + 8)}, a[2] = {load8(ka + o), load8(ka + o + 8)};
      const V8 b[2] = {load8(kb + o), load8(kb + o + 8)}, k[2] = {load8(kc + o), load8(kc + o + 8)};
      for (int j = 0; j < p1 - p0; ++j)
        for (int h = 0; h < 2; ++h) {
          V8 g = load8(gp + j * gs + 8 * h);
          if (kRelu) g = select8(mask[2 * (s0 + j) + h], g);
          if (kDx)
            store8(dxp + j * xs + 8 * h, fma8(a[h], g, fma8(k[h], sub8(load8(xp + j * xs + 8 * h), m[h]), b[h])));
          if (kDres) store8(drp + j * rs + 8 * h, g);
        }
    });
  });
}

template <bool kRelu>
void backward_data(int threads, const Plan& P, const float* x, const uint8_t* mask, const float* dy,
                   const float* mean, const float* ka, const float* kb, const float* kc, float* dx, float* dres) {
  if (dx && dres) backward_pieces<kRelu, true, true>(threads, P, x, mask, dy, mean, ka, kb, kc, dx, dres);
  else if (dx) backward_pieces<kRelu, true, false>(threads, P, x, mask, dy, mean, ka, kb, kc, dx, dres);
  else if (dres) backward_pieces<kRelu, false, true>(threads, P, x, mask, dy, mean, ka, kb, kc, dx, dres);
}

// Sums of g and g * (x - mean) into s.sum_a, s.sum_b (g: dy masked by the ReLU when kRelu).
template <bool kRelu>
void backward_sums(int threads, const Plan& P, const float* x, const uint8_t* mask, const float* dy,
                   const float* mean, Scratch& s) {
  channel_sums(
      threads, P,
      [=](int i, int cb, int p0) {
        const float* xp = x + P.x.at(i, cb, p0);
        const float* gp = dy + P.y.at(i, cb, p0);
        const uint8_t* mp = kRelu ? mask + 2 * ((static_cast<size_t>(i) * P.blocks + cb) * P.hw + p0) : nullptr;
        const size_t xs = P.x.pixel, gs = P.y.pixel;
        const float* m = mean + cb * kSeg;
        return [=](int j, int h, V8& a, V8& b) {
          a = load8(gp + j * gs + 8 * h);
          if (kRelu) a = select8(mp[2 * j + h], a);
          b = fma8(a, sub8(load8(xp + j * xs + 8 * h), load8(m + 8 * h)), zero8());
        };
      },
      s);
}

void check_layouts(const BnShape& s) {
  if (s.c % kSeg != 0 && !all_nhwc(s))
    raise(kExitFailure, "batch norm over nChw16c activations needs a multiple of 16 channels, not %d", s.c);
}

}  // namespace

void batchnorm_forward_train_layout(int threads, const BnShape& s, const float* x, const float* residual,
                                    const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                    float* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                    float* running_mean, float* running_var) {
  check_layouts(s);
  const int rows = static_cast<int>(s.rows()), c = s.c;
  if (all_nhwc(s))
    return batchnorm_forward_train_fast(threads, rows, c, x, residual, gamma, beta, eps, momentum, act, y,
                                        relu_mask, save_mean, save_invstd, running_mean, running_var);
  if (rows <= 0 || c <= 0) return;
  const Plan P = plan_of(s);
  Scratch& sc = scratch();
  // Sums of (x - k) and (x - k)^2 with k the mean of the first rows, as batchnorm_fast.cpp (the same k).
  sc.shift.assign(c, 0.0);
  const int head = std::min(rows, 8);
  for (int r = 0; r < head; ++r)
    for (int j = 0; j < c; ++j) sc.shift[j] += x[P.x.at(r / s.hw, j / kSeg, r % s.hw) + j % kSeg];
  sc.k.resize(c);
  for (int j = 0; j < c; ++j) sc.k[j] = static_cast<float>(sc.shift[j] / head);
  sc.shift.assign(sc.k.begin(), sc.k.end());
  const float* k = sc.k.data();
  channel_sums(
      threads, P,
      [=](int i, int cb, int p0) {
        const float* xp = x + P.x.at(i, cb, p0);
        const size_t xs = P.x.pixel;
        const float* kk = k + cb * kSeg;
        return [=](int j, int h, V8& a, V8& b) {
          a = sub8(load8(xp + j * xs + 8 * h), load8(kk + 8 * h));
          b = fma8(a, a, zero8());
        };
      },
      sc);
  sc.scale.resize(c);
  sc.sh.resize(c);
  for (int j = 0; j < c; ++j) {
    const double m1 = sc.sum_a[j] / rows;  // mean and variance of the shifted values
    batchnorm_finalize(rows, sc.shift[j] + m1, sc.sum_b[j] / rows - m1 * m1, gamma[j], beta[j], eps, momentum,
                       &save_mean[j], &save_invstd[j], &running_mean[j], &running_var[j], &sc.scale[j], &sc.sh[j]);
  }
  apply(threads, P, x, residual, act, sc.scale.data(), sc.sh.data(), y,
        act.relu ? reinterpret_cast<uint8_t*>(relu_mask) : nullptr);
}

void batchnorm_forward_infer_layout(int threads, const BnShape& s, const float* x, const float* residual,
                                    const float* gamma, const float* beta, const float* running_mean,
                                    const float* running_var, float eps, BnAct act, float* y) {
  check_layouts(s);
  const int rows = static_cast<int>(s.rows()), c = s.c;
  if (all_nhwc(s))
    return batchnorm_forward_infer_fast(threads, rows, c, x, residual, gamma, beta, running_mean, running_var, eps,
                                        act, y);
  if (rows <= 0 || c <= 0) return;
  Scratch& sc = scratch();
  sc.scale.resize(c);
  sc.sh.resize(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[j]) + eps);
    sc.scale[j] = static_cast<float>(gamma[j] * invstd);
    sc.sh[j] = static_cast<float>(beta[j] - running_mean[j] * gamma[j] * invstd);
  }
  apply(threads, plan_of(s), x, residual, act, sc.scale.data(), sc.sh.data(), y, nullptr);
}

void batchnorm_backward_layout(int threads, const BnShape& s, const float* x, const uint32_t* relu_mask,
                               const float* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                               float* dx, float* dresidual, float* dgamma, float* dbeta) {
  check_layouts(s);
  const int rows = static_cast<int>(s.rows()), c = s.c;
  if (all_nhwc(s))
    return batchnorm_backward_fast(threads, rows, c, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual,
                                   dgamma, dbeta);
  if (rows <= 0 || c <= 0) return;
  const Plan P = plan_of(s);
  Scratch& sc = scratch();
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(relu_mask);
  if (mask)
    backward_sums<true>(threads, P, x, mask, dy, save_mean, sc);
  else
    backward_sums<false>(threads, P, x, mask, dy, save_mean, sc);
  sc.ka.resize(c);
  sc.kb.resize(c);
  sc.kc.resize(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = save_invstd[j], sg = sc.sum_a[j], sgx = sc.sum_b[j] * invstd;
    dgamma[j] += static_cast<float>(sgx);
    dbeta[j] += static_cast<float>(sg);
    // dx = k (g - mean(g) - xhat mean(g xhat)), k = gamma invstd, xhat = (x - mean) invstd
    const double k = static_cast<double>(gamma[j]) * invstd;
    sc.ka[j] = static_cast<float>(k);
    sc.kb[j] = static_cast<float>(-k * sg / rows);
    sc.kc[j] = static_cast<float>(-k * invstd * sgx / rows);
  }
  const float *ka = sc.ka.data(), *kb = sc.kb.data(), *kc = sc.kc.data();
  if (mask)
    backward_data<true>(threads, P, x, mask, dy, save_mean, ka, kb, kc, dx, dresidual);
  else
    backward_data<false>(threads, P, x, mask, dy, save_mean, ka, kb, kc, dx, dresidual);
}

}  // namespace cnn
