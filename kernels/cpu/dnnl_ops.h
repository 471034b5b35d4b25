// Fast convolution and fully connected ops on oneDNN, used by the CPU backend (kernels/cpu/cpu_backend.cpp).
// Same semantics and layouts as kernels/conv2d.h and kernels/linear.h: x [N,H,W,C] NHWC (oneDNN `nhwc`),
// w [K,R,S,C/groups] KRSC (`ohwi`; grouped: `gohwi`), linear w [N,K]; parameter gradients accumulate, input
// gradients overwrite. Groups (depthwise: oneDNN's jit depthwise kernels), dilation and asymmetric padding
// as ConvDesc has them (kernels/cpu/dnnl_conv_shape.h).
// Primitives are created once per shape and cached; activations are used in place (no layout conversion),
// except around the Winograd kernels that fp32 3x3 stride-1 convolutions of 32+ channels use (blocked
// nChw16c activations, converted from and to NHWC at each call, dy once for both backward passes in
// conv_backward: see wino_eligible in dnnl_impl.h), unless the caller's tensors are in nChw16c already
// (blocked_ok).
// oneDNN's fast kernels want blocked filter layouts, and each direction a different one (forward Acdb64a,
// backward-data ABcd16a16b, backward-weights ABcd16b16a on AVX-512), so the filters stay KRSC in the flat
// parameter buffer and each parameter keeps copies in the layouts it is used in, re-laid out when the
// parameter version changes (once per optimizer step; at every call when the caller names no version); with
// KRSC filters oneDNN 2.6 falls back to its reference convolution (100x slower). After the first call of a
// shape nothing is allocated by this code: memory objects are rebound with set_data_handle, scratch is one
// buffer owned by DnnlOps (user scratchpad mode).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace cnn {

class DnnlOps {
 public:
  // threads: OpenMP threads oneDNN's kernels use (set on the calling thread before every op).
  explicit DnnlOps(int threads);
  ~DnnlOps();
  DnnlOps(const DnnlOps&) = delete;
  DnnlOps& operator=(const DnnlOps&) = delete;

  // See Backend::set_param_version.
  void set_param_version(uint64_t version);

  void conv_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
  void conv_backward_data(const ConvDesc& d, const float* dy, const float* w, float* dx);
  void conv_backward_filter(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db);

  void linear_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y);
  void linear_backward_data(int m, int k, int n, const float* dy, const float* w, float* dx);
  void linear_backward_weight(int m, int k, int n, const float* x, const float* dy, float* dw, float* db);

  // The same ops with activations, their gradients and the filters stored as `t` (kF32 or kBF16: oneDNN 2.6
  // has no fp16 CPU kernels); biases and weight gradients stay fp32, the latter accumulated in fp32. bf16 runs
  // natively only where dnnl_bf16_unsupported() is empty (otherwise oneDNN emulates it, slower than fp32).
  void conv_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y);
  void conv_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx);
  void conv_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw, float* db);
  // Both backward passes (Backend::conv2d_backward): conv_backward_filter, then conv_backward_data when dx is
  // not null, with the same results; where both run on the Winograd kernels dy is converted to the blocked
  // layout once (blocked_reuses counts the conversions saved).
  void conv_backward(DType t, const ConvDesc& d, const void* x, const void* dy, const void* w, float* dw,
                     float* db, void* dx);
  // Whether backward-data of `d` (n included) in type t runs on a kernel that can add the input gradient into dx
  // (Backend::conv2d_backward_data_adds): cnntrain's Winograd kernels, fp32. conv_backward_data_add: that pass,
  // dx += the input gradient, with the same bits as computing it and adding it afterwards.
  bool backward_data_adds(DType t, const ConvDesc& d) const;
  void conv_backward_data_add(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx);
  void linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b, void* y);
  void linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx);
  void linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw, float* db);

  // Whether the conv_* calls of `d` (fp32, no bias) take x and y in nChw16c (ConvDesc::x_layout, y_layout)
  // instead of NHWC: where its forward, its stride-1 backward-data (a flipped forward) and its backward-weights
  // all run on the Winograd kernels, which work in that layout, so that the caller's blocked tensors are
  // used in place and no conversion is needed (Backend::blocked_conv_ok). CNNTRAIN_BLOCKED_LAYOUT=0: never.
  bool blocked_ok(const ConvDesc& d);

  // Convolutions that ran on the Winograd kernels so far (forward, stride-1 backward-data as a flipped forward,
  // backward-weights): tests check that the shapes wino_eligible admits take them, and only those.
  uint64_t winograd_runs() const;
  uint64_t blocked_reuses() const;
  // Activation layout conversions (NHWC <-> nChw16c around the Winograd kernels) so far.
  uint64_t layout_conversions() const;
  // fp32 convolution passes that ran on cnntrain's own kernels instead of oneDNN's: few channels
  // (kernels/cpu/single_channel_conv.h, small_channel_conv.h), 3x3 "same" ones on Winograd (winograd16_conv.h) and
  // implicit GEMM (gemm_conv.h); CNNTRAIN_SMALL_CONV=0: none.
  uint64_t small_conv_runs() const;
  // Forward and backward-data passes of 1x1 stride-1 convolutions on fewer than 1024 output pixels that ran as
  // oneDNN matmuls on the filters as they are (no per-step re-layout or flip; dnnl_impl.h, small_pointwise).
  uint64_t pointwise_matmuls() const;

  // Implementation names oneDNN chose for a convolution shape without bias (fwd, bwd-data, bwd-weights), for
  // the bench.
  std::string conv_impl(const ConvDesc& d, DType t = DType::kF32);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

inline void DnnlOps::conv_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  conv_forward(DType::kF32, d, x, w, b, y);
}
inline void DnnlOps::conv_backward_data(const ConvDesc& d, const float* dy, const float* w, float* dx) {
  conv_backward_data(DType::kF32, d, dy, w, dx);
}
inline void DnnlOps::conv_backward_filter(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) {
  conv_backward_filter(DType::kF32, d, x, dy, dw, db);
}
inline void DnnlOps::linear_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) {
  linear_forward(DType::kF32, m, k, n, x, w, b, y);
}
inline void DnnlOps::linear_backward_data(int m, int k, int n, const float* dy, const float* w, float* dx) {
  linear_backward_data(DType::kF32, m, k, n, dy, w, dx);
}
inline void DnnlOps::linear_backward_weight(int m, int k, int n, const float* x, const float* dy, float* dw,
                                            float* db) {
  linear_backward_weight(DType::kF32, m, k, n, x, dy, dw, db);
}

// Empty when oneDNN runs bf16 convolution and matmul natively on this CPU (AVX512-BF16 or AMX, as limited by
// ONEDNN_MAX_CPU_ISA); otherwise a sentence naming what is missing.
std::string dnnl_bf16_unsupported();

}  // namespace cnn
