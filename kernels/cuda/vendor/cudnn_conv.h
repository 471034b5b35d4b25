// cuDNN convolutions for the CUDA backend (nvcc builds only), same math and layouts as kernels/conv2d.h:
// x [n,h,w,c] NHWC, w [k,r,s,c] KRSC (cuDNN's NHWC filter format), y [n,p,q,k]. Uses cuDNN 9's legacy
// convolution API (deprecated in 9 but present in every 9.x; the graph API would give the same kernels).
// Per problem shape and direction the algorithm is chosen once (heuristics, or a timed search with
// --cudnn.algo search) under the workspace cap and determinism policy of kernels/cuda/vendor/algo_select.h, and cached
// with its descriptors. Each call returns false when cuDNN has no usable algorithm for the shape: the caller
// then runs the custom kernel (and the fallback log names the layer once).
#pragma once
#include <cudnn.h>

#include <memory>

#include "kernels/backend.h"
#include "kernels/cuda/vendor/vendor_context.h"

namespace cnn {
namespace gpu {

class CudnnConv {
 public:
  explicit CudnnConv(VendorContext& ctx);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  cudnnHandle_t handle() const { return handle_; }
  // x, w, y, dx and dy of type t: fp32, or 16-bit (backend.h, "Ops on activations") on tensor cores with fp32
  // compute (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations).
  // y = conv(x, w) (+ b when not null; fp32 only: cuDNN adds an fp32 bias only to an fp32 output, so the
  // caller runs biased 16-bit convolutions on its own kernel).
  bool forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y);
  // dx = conv_transpose(dy, w) (overwritten).
  bool backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx);
  // dw (fp32) += dL/dw; the bias gradient stays with the caller (a column sum of dy). In 16 bits cuDNN's
  // filter gradient has the activations' type: it lands in a 16-bit scratch (one rounding) and is added to
  // dw by a kernel.
  bool backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw);

 private:
  struct Plan;
  Plan& plan(const ConvDesc& d, VendorType type);
  // One direction (Forward, BackwardData, BackwardFilter in the .cu: operands a, b -> out, out = conv + beta *
  // out) with the plan of `type`, its algorithm chosen on first use (a timed search runs on a, b and out);
  // false (and a fallback log line) when cuDNN has no algorithm.
  template <class Dir>
  bool run(VendorType type, const ConvDesc& d, const void* a, const void* b, void* out, float beta);

  VendorContext& ctx_;
  cudnnHandle_t handle_ = nullptr;
  ShapeCache<std::unique_ptr<Plan>> plans_;
};

}  // namespace gpu
}  // namespace cnn
