#include "kernels/cpu/dnnl_ops.h"

#include <algorithm>

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/dnnl_impl.h"
#include "kernels/cpu/single_channel_conv.h"
#include "kernels/cpu/winograd16_conv.h"

namespace cnn {

namespace {

// flip_filters: for each tap a K x C -> C x K transpose, in blocks of 16 filters by 8 channels (a block's lines
// stay in L1 while it is written), taps and blocks of 16 filters split over the threads. Flipped at every step
// (the filters change), it took 6-7% of ResNet-50's step on 28x28 images as a single-threaded scatter
// (docs/perf.md, eleventh pass).
template <class T>
void flip(const ConvDesc& d, const T* w, T* wf, int threads) {
  constexpr long kBlock = 16, kCBlock = 8;  // 16 filters: whole destination lines (measured best of 8-32 each)
  const long R = d.r, S = d.s, C = d.c, K = d.k, taps = R * S, kblocks = (K + kBlock - 1) / kBlock;
  parallel_for(threads, static_cast<size_t>(K) * taps * C, taps * kblocks, [&](long long u) {
    const long tap = static_cast<long>(u / kblocks), k0 = static_cast<long>(u % kblocks) * kBlock;
    const long k1 = std::min(K, k0 + kBlock), flipped = (R - 1 - tap / S) * S + (S - 1 - tap % S);
    for (long c0 = 0; c0 < C; c0 += kCBlock) {
      const long c1 = std::min(C, c0 + kCBlock);
      for (long k = k0; k < k1; ++k) {
        const T* src = w + (k * taps + tap) * C;
        T* dst = wf + flipped * K + k;
        for (long c = c0; c < c1; ++c) dst[c * taps * K] = src[c];
      }
    }
  });
}

}  // namespace

void flip_filters(const ConvDesc& d, const float* w, float* wf, int threads) { flip(d, w, wf, threads); }
void flip_filters(const ConvDesc& d, const uint16_t* w, uint16_t* wf, int threads) { flip(d, w, wf, threads); }

using dnnl_detail::memory;
using dnnl_detail::tag;
using dnnl_detail::dt;
using dnnl_detail::dnnl_type;

DnnlOps::DnnlOps(int threads) : p_(std::make_unique<Impl>(threads)) {}
DnnlOps::~DnnlOps() = default;

void DnnlOps::set_param_version(uint64_t version) { p_->param_version = version; }

void DnnlOps::conv_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) {
  Impl& I = *p_;
  if (I.own_kernels(t) && single_channel_forward_ok(d)) {
    ++I.small_runs;
    return single_channel_conv_forward(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(w), b,
                                       static_cast<float*>(y));
  }
  if (I.few_channels(t, d)) {
    ++I.small_runs;
    return small_channel_conv_forward(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(w), b,
                                      static_cast<float*>(y));
  }
  if (I.own_winograd(t, d)) {
    ++I.small_runs;
    return winograd16_forward(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(w), b,
                              static_cast<float*>(y));
  }
  if (I.own_gemm_forward(t, d)) {
    ++I.small_runs;
    return gemm_conv_forward(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(w), b,
                             static_cast<float*>(y));
  }
  if (Impl::small_pointwise(d)) {
    ++I.pointwise_matmuls;
    return linear_forward(t, d.n * d.h * d.w, d.c, d.k, x, w, b, y);
  }
  Impl::Conv& c = I.conv(d, b != nullptr, t);
  Impl::bind(c.w_user, w);
  auto relayout = [&](const memory& to) { I.run(c.w_to_fwd, {{DNNL_ARG_FROM, &c.w_user}, {DNNL_ARG_TO, &to}}); };
  const memory& wm = !c.fwd_reorder ? c.w_user
                                    : I.filters_for(w, Impl::key_of(d, b != nullptr, t), Impl::Use::kForward,
                                                    c.w_fwd_desc, relayout);
  I.run_forward(c, d, x, wm, b, y);
}

void DnnlOps::conv_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  Impl& I = *p_;
  if (I.few_channels(t, d)) {
    ++I.small_runs;
    return small_channel_conv_backward_data(I.threads, d, static_cast<const float*>(dy),
                                            static_cast<const float*>(w), static_cast<float*>(dx));
  }
  if (I.own_winograd(t, d)) {
    ++I.small_runs;
    return winograd16_backward_data(I.threads, d, static_cast<const float*>(dy), static_cast<const float*>(w),
                                    static_cast<float*>(dx));
  }
  // cnntrain's implicit GEMM reads the filters as they are, stride 1 or not (as the forward with flipped filters
  // it had to flip them at every step: 5 ms for 512 -> 512 3x3 at two threads, twice the product on 1x1 maps).
  if (I.own_gemm_data(t, d)) {
    ++I.small_runs;
    return gemm_conv_backward_data(I.threads, d, static_cast<const float*>(dy), static_cast<const float*>(w),
                                   static_cast<float*>(dx));
  }
  if (Impl::small_pointwise(d)) {
    ++I.pointwise_matmuls;
    return linear_backward_data(t, d.n * d.h * d.w, d.c, d.k, dy, w, dx);
  }
  if (d.plain() && d.stride_h == 1 && d.stride_w == 1 && 2 * d.pad_h == d.r - 1 && 2 * d.pad_w == d.s - 1) {
    // With stride 1 the input gradient is a forward convolution of dy with the filters flipped in space and
    // in/out channels swapped, padded by r-1-pad ("same" padding stays "same"). oneDNN's forward (brgconv)
    // is up to 2x faster on NHWC than its backward-data kernel, and the flip is filter-sized. Unpadded convs
    // (LeNet's 5x5) would get r-1 padding, i.e. mostly zero taps: they keep the backward-data primitive, as
    // do grouped, dilated and asymmetrically padded convs (whose transposes this flip does not build).
    const ConvDesc tr = Impl::flipped(d);
    Impl::Conv& ct = I.conv(tr, false, t);
    auto flip = [&](const memory& to) {
      I.w_flip.resize(static_cast<size_t>(d.k) * d.r * d.s * d.c * dtype_size(t));
      if (t == DType::kF32)
        flip_filters(d, static_cast<const float*>(w), reinterpret_cast<float*>(I.w_flip.data()), I.threads);
      else
        flip_filters(d, static_cast<const uint16_t*>(w), reinterpret_cast<uint16_t*>(I.w_flip.data()), I.threads);
      Impl::bind(ct.w_user, I.w_flip.data());
      if (ct.fwd_reorder)
        I.run(ct.w_to_fwd, {{DNNL_ARG_FROM, &ct.w_user}, {DNNL_ARG_TO, &to}});
      else
        std::memcpy(to.get_data_handle(), I.w_flip.data(), I.w_flip.size());
    };
    const memory& wm = I.filters_for(w, Impl::key_of(tr, false, t), Impl::Use::kFlippedForward,
                                     ct.w_fwd_desc, flip);
    I.run_forward(ct, tr, dy, wm, nullptr, dx);
    return;
  }
  Impl::nhwc_only(d);
  // The cache key includes the bias flag; backward-data does not use it, so look up the forward's entry.
  const bool bias = I.convs.count(Impl::key_of(d, true, t)) > 0;
  Impl::Conv& c = I.conv(d, bias, t);
  I.conv_backward_prims(d, c, bias);
  Impl::bind(c.dy, dy);
  Impl::bind(c.dx, dx);
  Impl::bind(c.w_user, w);
  const memory& wm =
      !c.bwd_reorder ? c.w_user
                     : I.filters_for(w, Impl::key_of(d, bias, t), Impl::Use::kBackwardData,
                                     c.w_bwd_desc, [&](const memory& to) {
                                       I.run(c.w_to_bwd, {{DNNL_ARG_FROM, &c.w_user}, {DNNL_ARG_TO, &to}});
                                     });
  I.run(c.bwd_d, {{DNNL_ARG_DIFF_DST, &c.dy}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DIFF_SRC, &c.dx}});
}

// conv_backward_data's first two choices: the few-channel kernels, then the Winograd ones.
bool DnnlOps::backward_data_adds(DType t, const ConvDesc& d) const {
  return !p_->few_channels(t, d) && p_->own_winograd(t, d);
}

void DnnlOps::conv_backward_data_add(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  if (!backward_data_adds(t, d))
    raise(kExitFailure, "internal: conv_backward_data_add on a %dx%d %d->%d convolution whose kernel cannot add "
          "(ask backward_data_adds)", d.r, d.s, d.c, d.k);
  ++p_->small_runs;
  winograd16_backward_data(p_->threads, d, static_cast<const float*>(dy), static_cast<const float*>(w),
                           static_cast<float*>(dx), true);
}

void DnnlOps::conv_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw, float* db) {
  Impl& I = *p_;
  if (I.own_kernels(t) && single_channel_filter_ok(d)) {
    ++I.small_runs;
    return single_channel_conv_backward_filter(I.threads, d, static_cast<const float*>(x),
                                               static_cast<const float*>(dy), dw, db);
  }
  if (I.few_channels(t, d)) {
    ++I.small_runs;
    return small_channel_conv_backward_filter(I.threads, d, static_cast<const float*>(x),
                                              static_cast<const float*>(dy), dw, db);
  }
  if (I.own_winograd(t, d) && !db) {
    ++I.small_runs;
    return winograd16_backward_filter(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(dy), dw);
  }
  if (I.own_gemm_filter(t, d)) {
    ++I.small_runs;
    return gemm_conv_backward_filter(I.threads, d, static_cast<const float*>(x), static_cast<const float*>(dy), dw,
                                     db);
  }
  if (d.plain() && d.r == 1 && d.s == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0) {
    // A 1x1 stride-1 convolution over NHWC is a matrix product over the n*h*w pixels: dw[K,C] += dy^T x.
    // oneDNN's matmul (brgemm) runs it up to 1.8x faster than its backward-weights convolution (ResNet-50's
    // 64->256 expansions: 42 vs 76 GFLOP/s at one thread, docs/perf.md) and accumulates in place.
    Impl::nhwc_only(d);
    linear_backward_weight(t, d.n * d.h * d.w, d.c, d.k, x, dy, dw, db);
    return;
  }
  Impl::Conv& c = I.conv(d, db != nullptr, t);
  I.conv_backward_prims(d, c, db != nullptr);
  Impl::bind(c.x, x);
  Impl::bind(c.dy, dy);
  Impl::bind(c.dw_user, dw);
  const bool xb = Impl::blocked(d.x_layout), yb = Impl::blocked(d.y_layout);
  if (c.wino_bwd_w) {  // never with a bias (wino_eligible)
    Impl::bind(c.xw_blk, xb ? x : I.blk[0]);
    Impl::bind(c.dyw_blk, yb ? dy : I.blk[1]);
    if (!xb) I.convert(c.xw_to_blk, c.x, c.xw_blk);
    if (!yb) I.convert(c.dyw_to_blk, c.dy, c.dyw_blk);
    I.run(c.bwd_w, {{DNNL_ARG_SRC, &c.xw_blk}, {DNNL_ARG_DIFF_DST, &c.dyw_blk}, {DNNL_ARG_DIFF_WEIGHTS, &c.dw_blk}});
    ++I.wino_runs;
    if (I.pair_dy == dy && !yb) I.pair_dy_blk = c.dyw_blk.get_desc();
  } else if (db) {
    Impl::nhwc_only(d);
    I.run(c.bwd_w, {{DNNL_ARG_SRC, &c.x}, {DNNL_ARG_DIFF_DST, &c.dy}, {DNNL_ARG_DIFF_WEIGHTS, &c.dw_blk},
                    {DNNL_ARG_DIFF_BIAS, &c.db_tmp}});
    const float* sums = static_cast<const float*>(c.db_tmp.get_data_handle());
    for (int k = 0; k < d.k; ++k) db[k] += sums[k];
  } else {
    Impl::nhwc_only(d);
    I.run(c.bwd_w, {{DNNL_ARG_SRC, &c.x}, {DNNL_ARG_DIFF_DST, &c.dy}, {DNNL_ARG_DIFF_WEIGHTS, &c.dw_blk}});
  }
  I.run(c.dw_from_bwd, {{DNNL_ARG_FROM, &c.dw_blk}, {DNNL_ARG_TO, &c.dw_user}});
}

void DnnlOps::conv_backward(DType t, const ConvDesc& d, const void* x, const void* dy, const void* w, float* dw,
                            float* db, void* dx) {
  Impl& I = *p_;
  struct Pair {  // the blocked dy is valid only within this call, even when a pass throws
    Impl& i;
    Pair(Impl& impl, const void* dy) : i(impl) { i.pair_dy = dy, i.pair_dy_blk = memory::desc(); }
    ~Pair() { i.pair_dy = nullptr, i.pair_dy_blk = memory::desc(); }
  } pair(I, dx ? dy : nullptr);
  conv_backward_filter(t, d, x, dy, dw, db);
  if (dx) conv_backward_data(t, d, dy, w, dx);
}

void DnnlOps::linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b, void* y) {
  Impl& I = *p_;
  const dt at = dnnl_type(t);
  // y[m,n] = x[m,k] * w^T, with w [n,k] row-major read as a column-major [k,n].
  Impl::Matmul& mm = I.matmul(0, m, k, n, b != nullptr, t, memory::desc({m, k}, at, tag::ab),
                              memory::desc({k, n}, at, tag::ba), memory::desc({m, n}, at, tag::ab), false);
  Impl::bind(mm.a, x);
  Impl::bind(mm.b, w);
  Impl::bind(mm.c, y);
  if (b) {
    Impl::bind(mm.bias, b);
    I.run(mm.p, {{DNNL_ARG_SRC, &mm.a}, {DNNL_ARG_WEIGHTS, &mm.b}, {DNNL_ARG_BIAS, &mm.bias}, {DNNL_ARG_DST, &mm.c}});
  } else {
    I.run(mm.p, {{DNNL_ARG_SRC, &mm.a}, {DNNL_ARG_WEIGHTS, &mm.b}, {DNNL_ARG_DST, &mm.c}});
  }
}

void DnnlOps::linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) {
  Impl& I = *p_;
  const dt at = dnnl_type(t);
  // dx[m,k] = dy[m,n] * w[n,k].
  Impl::Matmul& mm = I.matmul(1, m, k, n, false, t, memory::desc({m, n}, at, tag::ab),
                              memory::desc({n, k}, at, tag::ab), memory::desc({m, k}, at, tag::ab), false);
  Impl::bind(mm.a, dy);
  Impl::bind(mm.b, w);
  Impl::bind(mm.c, dx);
  I.run(mm.p, {{DNNL_ARG_SRC, &mm.a}, {DNNL_ARG_WEIGHTS, &mm.b}, {DNNL_ARG_DST, &mm.c}});
}

namespace {

// db[j] += sum over the m rows of dy[m, n] (element type T).
template <class T>
void add_column_sums(int m, int n, const T* dy, float* db) {
  for (int r = 0; r < m; ++r) {
    const T* g = dy + static_cast<size_t>(r) * n;
    for (int j = 0; j < n; ++j) db[j] += to_float(g[j]);
  }
}

}  // namespace

void DnnlOps::linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                                     float* db) {
  Impl& I = *p_;
  const dt at = dnnl_type(t);
  // dw[n,k] += dy^T[n,m] * x[m,k], dy [m,n] row-major read as a column-major [n,m]; sum post-op accumulates
  // (in fp32, whatever the operands' type).
  Impl::Matmul& mm = I.matmul(2, m, k, n, false, t, memory::desc({n, m}, at, tag::ba),
                              memory::desc({m, k}, at, tag::ab), memory::desc({n, k}, dt::f32, tag::ab), true);
  Impl::bind(mm.a, dy);
  Impl::bind(mm.b, x);
  Impl::bind(mm.c, dw);
  I.run(mm.p, {{DNNL_ARG_SRC, &mm.a}, {DNNL_ARG_WEIGHTS, &mm.b}, {DNNL_ARG_DST, &mm.c}});
  if (!db) return;
  switch (t) {
    case DType::kF32: return add_column_sums(m, n, static_cast<const float*>(dy), db);
    case DType::kBF16: return add_column_sums(m, n, static_cast<const Bf16*>(dy), db);
    case DType::kF16: return add_column_sums(m, n, static_cast<const F16*>(dy), db);
  }
}

bool DnnlOps::blocked_ok(const ConvDesc& d) {
  Impl& I = *p_;
  if (!I.blocked_allowed || !I.wino_eligible(d, false, DType::kF32)) return false;
  ConvDesc plain = d;
  plain.x_layout = plain.y_layout = ActLayout::kNHWC;
  if (I.own_winograd(DType::kF32, plain)) return false;  // cnntrain's kernels take NHWC (Impl::avx512_wide)
  Impl::Conv& c = I.conv(plain, false, DType::kF32);
  I.conv_backward_prims(plain, c, false);
  const ConvDesc tr = Impl::flipped(plain);
  Impl::Conv& ct = I.conv(tr, false, DType::kF32);
  if (!c.wino_fwd || !c.wino_bwd_w || !ct.wino_fwd) return false;
  // The Winograd kernels' activations must be exactly nChw16c (no padded blocks) to be the callers' tensors.
  const memory::desc xs({d.n, d.c, d.h, d.w}, dt::f32, tag::nChw16c), ys({d.n, d.k, d.p(), d.q()}, dt::f32,
                                                                          tag::nChw16c);
  return c.x_blk.get_desc() == xs && c.y_blk.get_desc() == ys && c.xw_blk.get_desc() == xs &&
         c.dyw_blk.get_desc() == ys && ct.x_blk.get_desc() == ys && ct.y_blk.get_desc() == xs;
}

uint64_t DnnlOps::winograd_runs() const { return p_->wino_runs; }
uint64_t DnnlOps::blocked_reuses() const { return p_->blk_reuses; }
uint64_t DnnlOps::layout_conversions() const { return p_->conversions; }
uint64_t DnnlOps::small_conv_runs() const { return p_->small_runs; }
uint64_t DnnlOps::pointwise_matmuls() const { return p_->pointwise_matmuls; }

std::string DnnlOps::conv_impl(const ConvDesc& d, DType t) {
  Impl& I = *p_;
  Impl::Conv& c = I.conv(d, false, t);
  I.conv_backward_prims(d, c, false);
  auto name = [](const Impl::Prim& p) {
    const_dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_get_primitive_desc(p.p.get(), &pd);
    const char* s = nullptr;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return std::string(s ? s : "?");
  };
  return name(c.fwd) + " / " + name(c.bwd_d) + " / " + name(c.bwd_w);
}

std::string dnnl_bf16_unsupported() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  // oneDNN's ISA values are bit sets: AVX512_CORE_BF16 and everything above it (AMX) contain its bits.
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) return "";
  const bool cpu_has = __builtin_cpu_supports("avx512bf16");
  return cpu_has ? "the CPU has AVX512_BF16 but ONEDNN_MAX_CPU_ISA limits oneDNN below AVX512_CORE_BF16; unset it"
                 : "this CPU lacks AVX512_BF16 (and AMX-BF16), the instruction set oneDNN's bf16 kernels need";
}

}  // namespace cnn
