// cuBLASLt matmuls for the linear layers of the CUDA backend (nvcc builds only), same math as
// kernels/linear.h: x [m,k], w [n,k], y [m,n] row-major. The row-major products are the column-major ones
// cuBLASLt computes on the transposed views (y^T = w x^T), so no operand is copied. Forward uses the bias
// epilogue; the weight gradient accumulates with beta = 1. The algorithm per shape comes from cuBLASLt's
// heuristics under the workspace cap (cached); TF32 compute for fp32 unless --gpu.tf32 false. Each call
// returns false when cuBLASLt offers no algorithm: the caller runs the custom kernel.
#pragma once
#include <cublasLt.h>

#include <memory>

#include "kernels/cuda/vendor/vendor_context.h"

namespace cnn {
namespace gpu {

class CublasLtLinear {
 public:
  explicit CublasLtLinear(VendorContext& ctx);
  ~CublasLtLinear();
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // x, w, y, dx and dy of type t (fp32, or 16-bit: tensor cores, fp32 accumulation; dw stays fp32).
  // cuBLASLt's bias epilogue wants the bias in the output's type, so a 16-bit forward takes b only when it is
  // null (the caller runs biased 16-bit layers on its own kernel).
  bool forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b, void* y);
  bool backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx);
  // dw += dy^T x; the bias gradient stays with the caller (a column sum of dy).
  bool backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw);

 private:
  struct Plan;
  // C (rows x cols, column-major) = alpha op(A) op(B) + beta C, A: a_rows x a_cols, B: b_rows x b_cols as
  // stored (column-major, leading dimension = rows); A and B of ab_type, C of c_type; bias fp32 (c_type fp32).
  bool matmul(const char* what, bool trans_a, bool trans_b, int rows, int cols, int inner, DType ab_type,
              const void* a, const void* b, float beta, DType c_type, void* c, const float* bias);

  VendorContext& ctx_;
  cublasLtHandle_t handle_ = nullptr;
  ShapeCache<std::unique_ptr<Plan>> plans_;
};

}  // namespace gpu
}  // namespace cnn
