#include "kernels/cuda/vendor/cublaslt_linear.h"

#include <cstdint>
#include <vector>

#include "kernels/cuda/vendor/vendor_check.h"

namespace cnn {
namespace gpu {

namespace {

// The largest power of two up to 256 dividing the address: cuBLASLt's heuristics assume 256-byte aligned
// operands unless told otherwise, and a micro-batch's rows can start anywhere.
int64_t alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

}  // namespace

struct CublasLtLinear::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  AlgoChoice choice;

  ~Plan() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

CublasLtLinear::CublasLtLinear(VendorContext& ctx) : ctx_(ctx) { CUBLAS_CHECK(cublasLtCreate(&handle_)); }

CublasLtLinear::~CublasLtLinear() {
  if (handle_) cublasLtDestroy(handle_);
}

bool CublasLtLinear::matmul(const char* what, bool trans_a, bool trans_b, int rows, int cols, int inner, DType ab_type,
                            const void* a, const void* b, float beta, DType c_type, void* c, const float* bias) {
  const ShapeCache<std::unique_ptr<Plan>>::Key key{trans_a, trans_b, rows, cols, inner, beta != 0.f, bias != nullptr,
                                                   alignment(a), alignment(b), alignment(c),
                                                   bias ? alignment(bias) : 0,
                                                   static_cast<int64_t>(vendor_type(ab_type)),
                                                   static_cast<int64_t>(vendor_type(c_type))};
  Plan& p = *plans_.get(key, [&] {
    auto plan = std::make_unique<Plan>();
    // 16-bit operands run on tensor cores with fp32 accumulation whatever --gpu.tf32 says.
    const cublasComputeType_t compute =
        ctx_.tf32 && ab_type == DType::kF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F));
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    // Stored shapes (column-major, leading dimension = rows): op(A) is rows x inner, op(B) inner x cols.
    const int a_rows = trans_a ? inner : rows, a_cols = trans_a ? rows : inner;
    const int b_rows = trans_b ? cols : inner, b_cols = trans_b ? inner : cols;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, cuda_type(ab_type), a_rows, a_cols, a_rows));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, cuda_type(ab_type), b_rows, b_cols, b_rows));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, cuda_type(c_type), rows, cols, rows));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t cap = ctx_.policy.workspace_cap;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap,
                                                      sizeof cap));
    const uint32_t align[4] = {static_cast<uint32_t>(key[7]), static_cast<uint32_t>(key[8]),
                               static_cast<uint32_t>(key[9]), static_cast<uint32_t>(key[9])};
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof align[i]));
    constexpr int kMax = 8;
    cublasLtMatmulHeuristicResult_t found[kMax];
    int count = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                             pref, kMax, found, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    std::vector<AlgoCandidate> cands;
    if (st == CUBLAS_STATUS_SUCCESS) {
      for (int i = 0; i < count; ++i) {
        AlgoCandidate cand;
        cand.algo = i;
        cand.ok = found[i].state == CUBLAS_STATUS_SUCCESS;
        cand.workspace = found[i].workspaceSize;
        // cuBLAS documents bit-wise reproducible results for a given toolkit, architecture and SM count.
        cand.deterministic = true;
        cands.push_back(cand);
      }
    } else if (st != CUBLAS_STATUS_NOT_SUPPORTED) {
      CUBLAS_CHECK(st);
    }
    plan->choice = choose_algo(cands, ctx_.policy);
    if (plan->choice.found()) plan->algo = found[plan->choice.algo].algo;
    if (!plan->choice.passed_over.empty()) ctx_.fallbacks->hint(ctx_.layer, what, plan->choice.passed_over);
    return plan;
  });
  if (!p.choice.found()) {
    ctx_.fallbacks->note(ctx_.layer, what, p.choice.why_none);
    return false;
  }
  if (bias)  // the plan is shared by every call of this shape; the pointer is this call's
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float one = 1.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &one, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo,
                              ctx_.workspace(p.choice.workspace), p.choice.workspace, ctx_.stream));
  return true;
}

// Row-major M[r, c] is the column-major M^T, so each product is computed transposed (see the header).
bool CublasLtLinear::forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b, void* y) {
  // y^T [n, m] = w [n, k] x^T: w stored column-major is [k, n] (transposed), x^T is [k, m].
  return matmul("cuBLASLt linear forward", true, false, n, m, k, t, w, x, 0.f, t, y, b);
}

bool CublasLtLinear::backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) {
  // dx^T [k, m] = w^T [k, n] dy^T [n, m]: w stored column-major is [k, n], dy^T is [n, m].
  return matmul("cuBLASLt linear backward-data", false, false, k, m, n, t, w, dy, 0.f, t, dx, nullptr);
}

bool CublasLtLinear::backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw) {
  // dw^T [k, n] += x^T [k, m] dy [m, n]: x^T stored is [k, m], dy stored column-major is [n, m] (transposed).
  // The gradient is fp32 whatever the operands are: cuBLASLt accumulates into it directly.
  return matmul("cuBLASLt linear backward-weight", false, true, k, n, m, t, x, dy, 1.f, DType::kF32, dw, nullptr);
}

}  // namespace gpu
}  // namespace cnn
