// DnnlOps' state (kernels/cpu/dnnl_ops.h): the cached oneDNN primitives, filters in oneDNN's layouts, the
// shared scratch and blocked-activation buffers. Internal to dnnl_ops.cpp and dnnl_blocked.cpp.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <dnnl.h>
#include <dnnl.hpp>
#include <initializer_list>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/cpu/dnnl_conv_shape.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/gemm_conv.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/cpu/small_channel_conv.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "kernels/cpu/winograd16_conv.h"
#include "kernels/dtype.h"
#include "src/base/error.h"

namespace cnn {

namespace dnnl_detail {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// Steady-state calls go through the C API with arguments on the stack: the C++ execute() builds a
// std::unordered_map per call, i.e. allocates.
struct Arg {
  int kind;
  const memory* mem;
};

// oneDNN's type for activations and 16-bit weight copies of `t`; f16 only where oneDNN has CPU kernels for it.
inline dt dnnl_type(DType t) {
  switch (t) {
    case DType::kF32: return dt::f32;
    case DType::kBF16: return dt::bf16;
    case DType::kF16: return dt::f16;
  }
  return dt::undef;
}

}  // namespace dnnl_detail

struct DnnlOps::Impl {
  using memory = dnnl_detail::memory;
  using tag = dnnl_detail::tag;
  using dt = dnnl_detail::dt;
  using Arg = dnnl_detail::Arg;
  explicit Impl(int threads) : threads(threads), eng(dnnl::engine::kind::cpu, 0), strm(eng) {
    if (const char* e = std::getenv("CNNTRAIN_MIN_PARALLEL_MFLOP")) min_parallel_flops = std::atof(e) * 1e6;
  }
  ~Impl() {
    std::free(scratch);
    for (void* b : blk) std::free(b);
  }

  int threads;
  // Ops below this many FLOPs run on one thread: a parallel region costs a wake-up and a barrier, and on a
  // loaded machine a descheduled team-mate stalls the whole op (measured in docs/perf.md).
  double min_parallel_flops = 40e6;
  dnnl::engine eng;
  dnnl::stream strm;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;  // one scratch buffer for all primitives (ops run one at a time)
  // The blocked activations of the Winograd path: input side [0] and output side [1], shared by all shapes.
  void* blk[2] = {nullptr, nullptr};
  size_t blk_bytes[2] = {0, 0};
  uint64_t wino_runs = 0;  // DnnlOps::winograd_runs
  // DnnlOps::conv_backward: the dy whose blocked copy the Winograd backward-weights left in blk[1] (and its
  // layout), which the flipped-forward backward-data then reads instead of converting dy again. Set only
  // inside conv_backward, where nothing can change dy between the two passes.
  const void* pair_dy = nullptr;
  memory::desc pair_dy_blk;
  uint64_t blk_reuses = 0;  // DnnlOps::blocked_reuses
  uint64_t conversions = 0;  // DnnlOps::layout_conversions

  // A primitive with its scratchpad memory (rebound to the shared scratch buffer at every call).
  struct Prim {
    dnnl::primitive p;
    memory scratch;
    int nthr = 1;  // OpenMP threads it was created for and runs with
    bool ok() const { return static_cast<bool>(p); }
  };

  struct Conv {
    dnnl::convolution_forward::primitive_desc fwd_pd;
    Prim fwd, bwd_d, bwd_w, w_to_fwd, w_to_bwd, dw_from_bwd;
    memory x, y, dx, dy, w_user, dw_user, b, db;  // bound to caller pointers per call
    memory dw_blk, db_tmp;                        // owned, oneDNN's layouts
    memory::desc w_bwd_desc;                      // the backward-data primitive's filter layout
    memory::desc w_fwd_desc;                      // the forward primitive's filter layout (direct or Winograd)
    bool fwd_reorder = false, bwd_reorder = false;
    int nthr = 1, nthr_w = 1;  // threads of forward/backward-data, of backward-weights
    // Winograd F(4x4, 3x3) (see wino_eligible): the primitive works on blocked nChw16c activations, reordered
    // from and to the caller's NHWC around each call, in the shared buffers blk[0] (x_blk, xw_blk) and blk[1]
    // (y_blk, dyw_blk).
    bool wino_fwd = false, wino_bwd_w = false;
    Prim x_to_blk, y_from_blk;  // forward: x in, y out
    Prim xw_to_blk, dyw_to_blk;  // backward-weights: x and dy in
    memory x_blk, y_blk, xw_blk, dyw_blk;
  };
  struct Matmul {
    Prim p;
    memory a, b, bias, c;
    int nthr = 1;
  };

  // Shape (groups, dilation and extra padding in an array of their own), bias, dtype of activations and filters.
  using ConvKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, std::array<int, 5>, bool, DType>;
  using MmKey = std::tuple<int, int, int, int, bool, DType>;  // m, k, n, which, bias, dtype
  std::map<ConvKey, Conv> convs;
  std::map<MmKey, Matmul> mms;

  // One parameter's filters in the layout of one primitive, re-laid out only when the parameter version
  // changes (Backend::set_param_version); version 0 (unknown) re-lays them out at every call.
  enum class Use { kForward, kBackwardData, kFlippedForward };
  struct Filter {
    memory blocked;
    uint64_t version = 0;
  };
  using FilterKey = std::tuple<const void*, ConvKey, Use>;
  std::map<FilterKey, Filter> filters;
  uint64_t param_version = 0;
  std::vector<char> w_flip;  // scratch for the flipped filters of a backward-data run as a forward

  static ConvKey key_of(const ConvDesc& d, bool bias, DType t) {
    const std::array<int, 5> general{d.groups, d.dilation_h, d.dilation_w, d.extra_pad_h, d.extra_pad_w};
    return {d.n, d.h, d.w, d.c, d.k, d.r, d.s, d.stride_h, d.stride_w, d.pad_h, d.pad_w, general, bias, t};
  }

  // The cached filters of `w` for `use`; `fill` writes them (into the entry's memory) when they are stale.
  template <class Fill>
  const memory& filters_for(const void* w, const ConvKey& key, Use use, const memory::desc& md, Fill fill) {
    Filter& f = filters[{w, key, use}];
    if (!f.blocked) f.blocked = memory(md, eng);
    if (param_version == 0 || f.version != param_version) {
      fill(f.blocked);
      f.version = param_version;
    }
    return f.blocked;
  }

  // Threads of an op of `flops`; fixed per shape, so results stay deterministic for a given --threads.
  int threads_for(double flops) const { return flops >= min_parallel_flops ? threads : 1; }
  static void set_threads(int n) {
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
  }

  dnnl::primitive_attr attr() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }

  void reserve_scratch(const memory::desc& md) {
    const size_t need = md.get_size();
    if (need <= scratch_bytes) return;
    std::free(scratch);
    scratch_bytes = (need + 4095) / 4096 * 4096;
    scratch = host_alloc(scratch_bytes, 4096);
    if (!scratch) raise(kExitFailure, "out of host memory allocating %.1f MiB of oneDNN scratch", need / 1048576.0);
  }

  // Call with the primitive's thread count already set (set_threads) when it was created.
  Prim prim(dnnl::primitive p, const memory::desc& scratch_desc) {
    reserve_scratch(scratch_desc);
    return {std::move(p), memory(scratch_desc, eng, DNNL_MEMORY_NONE), omp_get_max_threads()};
  }

  // Filter reorders are small (<= a few hundred KiB): one thread. In parallel they cost more in wake-ups and
  // barriers than they save (measured: 0.7 ms per reorder at 2 threads on a loaded machine).
  Prim reorder(const memory& from, const memory& to, bool accumulate) {
    const int keep = omp_get_max_threads();
    set_threads(1);
    dnnl::primitive_attr a = attr();
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      a.set_post_ops(po);
    }
    dnnl::reorder::primitive_desc pd(eng, from.get_desc(), eng, to.get_desc(), a);
    Prim r = prim(dnnl::reorder(pd), pd.scratchpad_desc());
    set_threads(keep);
    return r;
  }

  // A memory of layout `md` that lives in the shared blocked-activation buffer `i` (grown to fit; bound
  // again at each call with bind_blk).
  memory blk_memory(const memory::desc& md, int i) {
    const size_t need = md.get_size();
    if (need > blk_bytes[i]) {
      if (i == 1) pair_dy_blk = memory::desc();  // the blocked dy it held is gone
      std::free(blk[i]);
      blk_bytes[i] = (need + 4095) / 4096 * 4096;
      blk[i] = host_alloc(blk_bytes[i], 4096);
      if (!blk[i])
        raise(kExitFailure, "out of host memory allocating %.1f MiB for Winograd activations", need / 1048576.0);
    }
    return memory(md, eng, DNNL_MEMORY_NONE);
  }

  // An activation reorder (NHWC <-> nChw16c) of `from` into `to` on the op's threads.
  Prim act_reorder(const memory::desc& from, const memory::desc& to, int nthr) {
    const int keep = omp_get_max_threads();
    set_threads(nthr);
    dnnl::reorder::primitive_desc pd(eng, from, eng, to, attr());
    Prim r = prim(dnnl::reorder(pd), pd.scratchpad_desc());
    set_threads(keep);
    return r;
  }

  // Winograd F(4x4, 3x3) convolution (oneDNN 2.6's jit_wino_4x3, AVX-512, fp32 only) for 3x3 stride-1 "same"
  // convolutions without bias whose channel counts are multiples of 16, from 32 up: 2.25x fewer
  // multiplications, results within ~1e-6 of the direct convolution's largest output and deterministic for a
  // thread count (docs/perf.md has the per-shape measurements). Used for the forward pass (and with it the
  // stride-1 backward-data pass, which runs as a forward convolution) and backward-weights. At 16 channels
  // the direct kernels are faster (ResNet-20's stage 1: 55% of the FMA peak on Winograd against 88% direct);
  // from 32 the Winograd step is faster with the layout conversions counted (ResNet-20: 4.5% per training
  // step, docs/perf.md). CNNTRAIN_WINOGRAD=0 turns it off (docs/environment.md).
  bool wino_allowed = [] {
    const char* e = std::getenv("CNNTRAIN_WINOGRAD");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  // Blocked activations (DnnlOps::blocked_ok); CNNTRAIN_BLOCKED_LAYOUT=0 turns them off (docs/environment.md).
  bool blocked_allowed = [] {
    const char* e = std::getenv("CNNTRAIN_BLOCKED_LAYOUT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  // cnntrain's own fp32 kernels for convolutions with few channels (kernels/cpu/single_channel_conv.h,
  // small_channel_conv.h) and 16 -> 16 channel 3x3 ones (winograd16_conv.h; 32 and 64 channels too, and below
  // AVX-512 128 and 256: own_winograd), counted in small_runs; CNNTRAIN_SMALL_CONV=0 leaves them to oneDNN
  // (docs/environment.md).
  bool small_allowed = [] {
    const char* e = std::getenv("CNNTRAIN_SMALL_CONV");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  uint64_t small_runs = 0;
  uint64_t pointwise_matmuls = 0;  // small_pointwise passes run as matmuls
  bool own_kernels(DType t) const { return t == DType::kF32 && small_allowed; }
  // oneDNN 2.6's Winograd kernels exist from AVX-512 on (ResNet-50's 128- and 256-channel 3x3 layers use
  // them and blocked activations there); below it the 32 -> 256 channel 3x3 "same" convolutions run on
  // cnntrain's own Winograd kernels (winograd16_conv.h) instead of oneDNN's direct ones (docs/perf.md), unless
  // either CNNTRAIN_SMALL_CONV=0 or CNNTRAIN_WINOGRAD=0.
  bool onednn_winograd_isa =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  bool own_winograd(DType t, const ConvDesc& d) const {
    return own_kernels(t) &&
           (winograd16_ok(d) || (wino_allowed && wide_winograd(d) && (!onednn_winograd_isa || avx512_wide(d))));
  }
  // From AVX-512 on, the 32 -> 32 and 64 -> 64 ones (ResNet-20's second and third stages, ResNet-50's 64-channel
  // 3x3 layers) run on cnntrain's kernels all the same, on their AVX-512 code (winograd16_avx512.h): 1.3-1.9x
  // oneDNN 2.6's jit_wino_4x3 and direct avx512_core kernels per pass on ResNet-20's layers, 1.05-1.4x on
  // ResNet-50's 56x56 ones; NHWC activations instead of oneDNN's blocked ones (blocked_ok says no to them).
  // CNNTRAIN_AVX512_KERNELS=0 leaves them to oneDNN (docs/perf.md, fifteenth pass).
  static bool avx512_wide(const ConvDesc& d) {
    return d.c >= 32 && wino16_avx512_takes(d.c) && avx512_kernels_enabled();
  }
  // The wide Winograd kernels transform the filters at every call (C x K x 36 values) and compute whole 4x4 tiles,
  // so with few output pixels the direct kernels are faster: from 64 channels they need 4096 of them (n * h * w;
  // ResNet-50's 3x3 layers on 28x28 images, at 7x7 down to 2x2 maps, ran 1.3-13x slower on them than on the
  // implicit GEMM; docs/perf.md, eleventh pass). 32 channels (ResNet-20's second stage) keep them.
  // CNNTRAIN_WINOGRAD_MIN_PIXELS=N sets the bound (docs/environment.md).
  long wino_min_pixels = [] {
    const char* e = std::getenv("CNNTRAIN_WINOGRAD_MIN_PIXELS");
    return e && *e ? std::max(0L, std::atol(e)) : 4096L;
  }();
  // A 1x1 stride-1 convolution over NHWC on fewer than 1024 output pixels (n * h * w: ResNet-50's later stages
  // on 28x28 images) runs its forward and backward-data as oneDNN matmuls, which read the KRSC filters as they
  // are: the convolution primitive re-lays them out (and backward-data flips them) at every step, which there
  // costs more than the product (1.3-2.6x forward, 1.2-5x backward-data; docs/perf.md, eleventh pass). Larger maps
  // keep the convolution primitive (0.65-1.2x of it as a matmul at ResNet-50's 224x224 sizes).
  static bool small_pointwise(const ConvDesc& d) {
    return d.plain() && d.r == 1 && d.s == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 &&
           d.pad_w == 0 && d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC &&
           static_cast<long>(d.n) * d.h * d.w < 1024;
  }
  bool wide_winograd(const ConvDesc& d) const {
    return winograd_wide_ok(d) && (d.c < 64 || static_cast<long>(d.n) * d.h * d.w >= wino_min_pixels);
  }
  // Below AVX-512, convolutions with 3x3 (or larger) taps that have no Winograd kernel here (strided ones, 512
  // channels, C != K; the Winograd shapes stay with oneDNN under CNNTRAIN_WINOGRAD=0) run on cnntrain's
  // implicit-GEMM kernels (gemm_conv.h), where oneDNN 2.7's jit:avx2 reaches 25-45% of the FMA peak: the forward
  // from 128 input channels, backward-data from 128 input and output channels (reading the filters as they are,
  // no flipped copy), backward-weights from 64 input channels (docs/perf.md, ninth pass).
  // CNNTRAIN_GEMM_CONV=0 or CNNTRAIN_SMALL_CONV=0 leaves them to oneDNN.
  bool gemm_allowed = [] {
    const char* e = std::getenv("CNNTRAIN_GEMM_CONV");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  bool own_gemm(DType t, const ConvDesc& d, int min_channels) const {
    return own_kernels(t) && gemm_allowed && !onednn_winograd_isa && gemm_conv_ok(d) && d.r * d.s > 1 &&
           d.c >= min_channels && !winograd16_ok(d) && !wide_winograd(d);
  }
  bool own_gemm_forward(DType t, const ConvDesc& d) const { return own_gemm(t, d, 128); }
  bool own_gemm_data(DType t, const ConvDesc& d) const { return own_gemm(t, d, 128) && d.k >= 128 && d.k % 16 == 0; }
  // Backward-weights also of the 1x1 convolutions where oneDNN 2.7 is measured weak on AVX2 (docs/perf.md, tenth
  // pass): strided ones from 256 input channels to 512 or more (the projection shortcuts of ResNet-50 and of
  // ResNet-18's last stage; its jit_1x1 convolution: 57-106 GFLOP/s at 2 threads, 1.1-1.8x slower; 64-128 input
  // channels, ResNet-18's others, 0.75-0.9x, and 256 -> 128 0.84-0.97x: left to it), the
  // 256 -> 1024 expansions of ResNet-50/101/152 (its matmul: 43-62 GFLOP/s at 10x10-20x20 maps, batch 32 and 64;
  // 1.6-1.8x slower) and their 1024 -> 256 reductions (56-75 GFLOP/s at 2x2-28x28 maps, batch 32 and 64;
  // 1.5-2.0x slower, twelfth pass), and stride-1 ones with 128-512 channels on both sides (ResNet-50's 28x28
  // layers: 1.04-1.4x at batch 16-64; 56x56 x 256 -> 128 0.97-1.2x; thirteenth pass). The others stay on the
  // matmul: fewer channels (56x56 x 64 -> 256 and back: 0.76-0.9x) or 1024 and more (0.67-0.94x).
  // And of the first layers whose few channels make the packed columns straddle taps (gemm_conv_filter_ok) with
  // at least 64 columns and 64 filters: ResNet's 7x7 stem on RGB (oneDNN: 43-51 GFLOP/s, cnntrain 1.16-1.30x
  // faster), not RGB 3x3 layers (27 columns: 0.4-0.9x).
  bool own_gemm_filter(DType t, const ConvDesc& d) const {
    if (!own_kernels(t) || !gemm_allowed || onednn_winograd_isa) return false;
    if (d.r == 1 && d.s == 1) {
      if (!gemm_conv_ok(d)) return false;
      if (d.stride_h > 1 || d.stride_w > 1) return d.c >= 256 && d.k >= 512;
      return (d.c == 256 && d.k == 1024) || (d.c == 1024 && d.k == 256) ||
             (std::min(d.c, d.k) >= 128 && std::max(d.c, d.k) <= 512);
    }
    if (!gemm_conv_ok(d)) return gemm_conv_filter_ok(d) && d.k >= 64 && d.r * d.s * d.c >= 64;
    return own_gemm(t, d, 64);
  }
  // 4-8 input channels: at 2-3 (RGB first layers) oneDNN's backward-weights is the faster one at one thread
  // (ResNet-20's conv1, 3 -> 16: 1.56 against 2.34 ms), and first layers need no backward-data.
  bool few_channels(DType t, const ConvDesc& d) const { return own_kernels(t) && d.c >= 4 && small_channel_ok(d); }
  // Paths other than the Winograd kernels' take NHWC only; blocked_ok never offers them another layout.
  static void nhwc_only(const ConvDesc& d) {
    CNN_CHECK(!blocked(d.x_layout) && !blocked(d.y_layout),
              "convolution %dx%d %d->%d on %dx%d: nChw16c activations where only NHWC works (ask blocked_ok)", d.r,
              d.s, d.c, d.k, d.h, d.w);
  }
  // The stride-1 backward-data pass of `d` as a forward convolution (with the flipped filters): dy in, dx out.
  static ConvDesc flipped(const ConvDesc& d) {
    ConvDesc tr;
    tr.n = d.n, tr.h = d.p(), tr.w = d.q(), tr.c = d.k, tr.k = d.c, tr.r = d.r, tr.s = d.s;
    tr.pad_h = d.r - 1 - d.pad_h, tr.pad_w = d.s - 1 - d.pad_w;
    tr.x_layout = d.y_layout, tr.y_layout = d.x_layout;
    return tr;
  }
  bool wino_eligible(const ConvDesc& d, bool bias, DType t) const {
    return wino_allowed && t == DType::kF32 && !bias && d.plain() && d.r == 3 && d.s == 3 && d.stride_h == 1 &&
           d.stride_w == 1 && d.pad_h == 1 && d.pad_w == 1 && d.c % 16 == 0 && d.k % 16 == 0 && d.c >= 32 &&
           d.k >= 32;
  }

  static void bind(const memory& m, const void* ptr) {
    CNN_CHECK(dnnl_memory_set_data_handle_v2(m.get(), const_cast<void*>(ptr), nullptr) == dnnl_success,
              "oneDNN set_data_handle");
  }

  void run(const Prim& p, std::initializer_list<Arg> args) {
    set_threads(p.nthr);
    dnnl_exec_arg_t a[8];
    int n = 0;
    for (const Arg& x : args) a[n++] = {x.kind, x.mem->get()};
    if (p.scratch) {
      bind(p.scratch, scratch);
      a[n++] = {DNNL_ARG_SCRATCHPAD, p.scratch.get()};
    }
    dnnl_status_t s = dnnl_primitive_execute(p.p.get(), strm.get(), n, a);
    CNN_CHECK(s == dnnl_success, "oneDNN execute failed (status %d)", static_cast<int>(s));
  }

  // An activation layout conversion (NHWC <-> nChw16c), counted (DnnlOps::layout_conversions).
  void convert(const Prim& p, const memory& from, const memory& to) {
    run(p, {{DNNL_ARG_FROM, &from}, {DNNL_ARG_TO, &to}});
    ++conversions;
  }

  Conv& conv(const ConvDesc& d, bool bias, DType t) {
    const ConvKey key = key_of(d, bias, t);
    auto it = convs.find(key);
    if (it != convs.end()) return it->second;
    Conv& c = convs[key];
    const double flops = 2.0 * d.n * d.p() * d.q() * d.k * d.r * d.s * (d.c / d.groups);
    c.nthr = threads_for(flops);
    // oneDNN 2.6's backward-weights kernel partitions small problems badly: LeNet's 5x5 6->16 conv takes 12 ms
    // on 2 threads and 0.6 ms on one, ResNet-20's 3->16 conv1 4-8 ms against 1.2-1.6 (docs/perf.md). Below 5x
    // the threshold it runs on one thread.
    c.nthr_w = flops >= 5 * min_parallel_flops ? threads : 1;
    set_threads(c.nthr);
    // Grouped convolutions (depthwise included) take oneDNN's grouped kernels (jit depthwise where groups
    // == c == k), dilated ones its dilated kernels; none of them is a Winograd shape (wino_eligible).
    const DnnlConvShape sh = dnnl_conv_shape(d);
    const memory::dims &src = sh.src, &wei = sh.wei, &dst = sh.dst, &strides = sh.strides, &pad_l = sh.pad_l,
                       &pad_r = sh.pad_r;
    const dt at = dnnl_detail::dnnl_type(t);
    memory::desc x_md(src, at, tag::nhwc), y_md(dst, at, tag::nhwc);
    memory::desc w_any(wei, at, tag::any), w_md(wei, at, sh.w_tag);
    memory::desc b_md = bias ? memory::desc({d.k}, dt::f32, tag::x) : memory::desc();
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, x_md,
                                       w_any, b_md, y_md, strides, sh.dilates, pad_l, pad_r);
    c.fwd_pd = dnnl::convolution_forward::primitive_desc(fd, attr(), eng);
    c.fwd = prim(dnnl::convolution_forward(c.fwd_pd), c.fwd_pd.scratchpad_desc());
    c.x = memory(x_md, eng, DNNL_MEMORY_NONE);
    c.y = memory(y_md, eng, DNNL_MEMORY_NONE);
    c.dx = memory(x_md, eng, DNNL_MEMORY_NONE);
    c.dy = memory(y_md, eng, DNNL_MEMORY_NONE);
    c.w_user = memory(w_md, eng, DNNL_MEMORY_NONE);
    // Weight gradients are fp32 whatever the activations are: they accumulate into the fp32 gradient buffer.
    c.dw_user = memory(memory::desc(wei, dt::f32, sh.w_tag), eng, DNNL_MEMORY_NONE);
    if (bias) c.b = memory(b_md, eng, DNNL_MEMORY_NONE);
    c.w_fwd_desc = c.fwd_pd.weights_desc();
    if (wino_eligible(d, bias, t)) {
      try {
        const memory::desc a_src(src, at, tag::any), a_dst(dst, at, tag::any);
        dnnl::convolution_forward::desc wd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_winograd,
                                           a_src, w_any, a_dst, strides, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc wpd(wd, attr(), eng);
        c.fwd = prim(dnnl::convolution_forward(wpd), wpd.scratchpad_desc());
        c.w_fwd_desc = wpd.weights_desc();
        c.x_blk = blk_memory(wpd.src_desc(), 0);
        c.y_blk = blk_memory(wpd.dst_desc(), 1);
        c.x_to_blk = act_reorder(x_md, wpd.src_desc(), c.nthr);
        c.y_from_blk = act_reorder(wpd.dst_desc(), y_md, c.nthr);
        c.wino_fwd = true;
      } catch (const dnnl::error&) {
        // No Winograd kernel for this CPU or shape: the direct convolution stays.
      }
    }
    c.fwd_reorder = c.w_fwd_desc != w_md;
    if (c.fwd_reorder) c.w_to_fwd = reorder(c.w_user, memory(c.w_fwd_desc, eng, DNNL_MEMORY_NONE), false);
    return c;
  }

  // Callers' tensors in nChw16c (ConvDesc::x_layout, y_layout) are used in place; NHWC ones are converted.
  static bool blocked(ActLayout l) { return l == ActLayout::kNChw16c; }

  void run_forward(Conv& c, const ConvDesc& d, const void* x, const memory& wm, const float* b, void* y) {
    bind(c.x, x);
    bind(c.y, y);
    const bool xb = blocked(d.x_layout), yb = blocked(d.y_layout);
    if (c.wino_fwd) {  // never with a bias (wino_eligible)
      // In conv_backward, dy (this flipped forward's x) may already be blocked in blk[1]: read it there and
      // write y to blk[0] instead.
      const bool reuse = !xb && pair_dy && x == pair_dy && c.x_blk.get_desc() == pair_dy_blk &&
                         c.y_blk.get_desc().get_size() <= blk_bytes[0];
      bind(c.x_blk, xb ? x : blk[reuse ? 1 : 0]);
      bind(c.y_blk, yb ? y : blk[reuse ? 0 : 1]);
      if (reuse)
        ++blk_reuses;
      else if (!xb)
        convert(c.x_to_blk, c.x, c.x_blk);
      run(c.fwd, {{DNNL_ARG_SRC, &c.x_blk}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DST, &c.y_blk}});
      if (!yb) convert(c.y_from_blk, c.y_blk, c.y);
      ++wino_runs;
      return;
    }
    nhwc_only(d);
    if (b) {
      bind(c.b, b);
      run(c.fwd, {{DNNL_ARG_SRC, &c.x}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_BIAS, &c.b}, {DNNL_ARG_DST, &c.y}});
    } else {
      run(c.fwd, {{DNNL_ARG_SRC, &c.x}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DST, &c.y}});
    }
  }

  void conv_backward_prims(const ConvDesc& d, Conv& c, bool bias) {
    if (c.bwd_w.ok()) return;
    set_threads(c.nthr);
    const DnnlConvShape sh = dnnl_conv_shape(d);
    const memory::dims &strides = sh.strides, &pad_l = sh.pad_l, &pad_r = sh.pad_r;
    const memory::desc w_md = c.w_user.get_desc();
    const memory::desc w_any(sh.wei, w_md.data_type(), tag::any);
    const memory::desc x_md = c.x.get_desc(), y_md = c.y.get_desc();
    dnnl::convolution_backward_data::desc bdd(dnnl::algorithm::convolution_direct, x_md, w_any, y_md, strides,
                                              sh.dilates, pad_l, pad_r);
    dnnl::convolution_backward_data::primitive_desc bd_pd(bdd, attr(), eng, c.fwd_pd);
    c.bwd_d = prim(dnnl::convolution_backward_data(bd_pd), bd_pd.scratchpad_desc());
    c.w_bwd_desc = bd_pd.weights_desc();
    c.bwd_reorder = c.w_bwd_desc != w_md;
    if (c.bwd_reorder) c.w_to_bwd = reorder(c.w_user, memory(bd_pd.weights_desc(), eng, DNNL_MEMORY_NONE), false);
    const memory::desc b_md = bias ? memory::desc({d.k}, dt::f32, tag::x) : memory::desc();
    const memory::desc dw_any(sh.wei, dt::f32, tag::any);
    dnnl::convolution_backward_weights::desc bwd(dnnl::algorithm::convolution_direct, x_md, dw_any, b_md, y_md,
                                                 strides, sh.dilates, pad_l, pad_r);
    set_threads(c.nthr_w);
    dnnl::convolution_backward_weights::primitive_desc bw_pd(bwd, attr(), eng, c.fwd_pd);
    if (w_md.data_type() == dt::f32 && wino_eligible(d, bias, DType::kF32)) {
      try {
        const memory::desc a_src(x_md.dims(), dt::f32, tag::any), a_dst(y_md.dims(), dt::f32, tag::any);
        dnnl::convolution_forward::desc hd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_winograd,
                                           a_src, w_any, a_dst, strides, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc hint(hd, attr(), eng);
        dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_winograd, a_src, dw_any, a_dst,
                                                    strides, pad_l, pad_r);
        dnnl::convolution_backward_weights::primitive_desc wpd(wd, attr(), eng, hint);
        c.xw_blk = blk_memory(wpd.src_desc(), 0);
        c.dyw_blk = blk_memory(wpd.diff_dst_desc(), 1);
        c.xw_to_blk = act_reorder(x_md, wpd.src_desc(), c.nthr_w);
        c.dyw_to_blk = act_reorder(y_md, wpd.diff_dst_desc(), c.nthr_w);
        bw_pd = wpd;
        c.wino_bwd_w = true;
      } catch (const dnnl::error&) {
        // No Winograd kernel for this CPU or shape: the direct convolution stays.
      }
    }
    c.bwd_w = prim(dnnl::convolution_backward_weights(bw_pd), bw_pd.scratchpad_desc());
    set_threads(c.nthr);
    // oneDNN overwrites diff_weights; the interface accumulates, so it lands in dw_blk and a reorder with a
    // sum post-op adds it to dw (same cost as the layout conversion alone).
    c.dw_blk = memory(bw_pd.diff_weights_desc(), eng);
    c.dw_from_bwd = reorder(c.dw_blk, c.dw_user, true);
    if (bias) c.db_tmp = memory(b_md, eng);
  }

  Matmul& matmul(int which, int m, int k, int n, bool bias, DType t, const memory::desc& a_md,
                 const memory::desc& b_md, const memory::desc& c_md, bool accumulate) {
    MmKey key{m, k, n, which, bias, t};
    auto it = mms.find(key);
    if (it != mms.end()) return it->second;
    Matmul& mm = mms[key];
    // oneDNN's matmul splits small products well (LeNet-5's 400 -> 120 layer, 25 MFLOP at batch 256, gains
    // from two threads where a convolution of that size loses): a fifth of the convolutions' threshold.
    mm.nthr = threads_for(5 * 2.0 * m * k * n);
    set_threads(mm.nthr);
    memory::desc bias_md = bias ? memory::desc({1, c_md.dims()[1]}, dt::f32, tag::ab) : memory::desc();
    dnnl::primitive_attr a = attr();
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      a.set_post_ops(po);
    }
    dnnl::matmul::desc md(a_md, b_md, bias_md, c_md);
    dnnl::matmul::primitive_desc pd(md, a, eng);
    mm.p = prim(dnnl::matmul(pd), pd.scratchpad_desc());
    mm.a = memory(a_md, eng, DNNL_MEMORY_NONE);
    mm.b = memory(b_md, eng, DNNL_MEMORY_NONE);
    mm.c = memory(c_md, eng, DNNL_MEMORY_NONE);
    if (bias) mm.bias = memory(bias_md, eng, DNNL_MEMORY_NONE);
    return mm;
  }
};

}  // namespace cnn
