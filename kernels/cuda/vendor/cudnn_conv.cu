#include "kernels/cuda/vendor/cudnn_conv.h"

#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/vendor/vendor_check.h"
#include "src/base/error.h"

namespace cnn {
namespace gpu {

namespace {

const float kOne = 1.f, kZero = 0.f;

cudnnDataType_t cudnn_type(VendorType t) {
  switch (t) {
    case VendorType::kF32: return CUDNN_DATA_FLOAT;
    case VendorType::kBF16: return CUDNN_DATA_BFLOAT16;
    case VendorType::kF16: return CUDNN_DATA_HALF;
  }
  return CUDNN_DATA_FLOAT;
}

// cuDNN's perf records of the three directions differ only in the algorithm's enum type.
template <class Perf>
std::vector<AlgoCandidate> candidates(const Perf* perf, int count, bool tf32) {
  std::vector<AlgoCandidate> v;
  for (int i = 0; i < count; ++i) {
    AlgoCandidate c;
    c.algo = static_cast<int>(perf[i].algo);
    // Without TF32 the descriptor asks for FMA math; a tensor-op result would round the inputs anyway.
    c.ok = perf[i].status == CUDNN_STATUS_SUCCESS && (tf32 || perf[i].mathType != CUDNN_TENSOR_OP_MATH);
    c.time_ms = perf[i].time;
    c.workspace = perf[i].memory;
    c.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    v.push_back(c);
  }
  return v;
}

}  // namespace

struct CudnnConv::Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool chosen[3] = {false, false, false};
  AlgoChoice choice[3];
  bool tensor_ops;             // tensor-core algorithms allowed: 16-bit data, or fp32 with TF32
  DeviceArena* arena;
  void* dw16 = nullptr;        // 16-bit plans: the filter gradient in cuDNN's type, before it joins fp32 dw

  Plan(const ConvDesc& d, VendorType type, bool tf32, DeviceArena& arena)
      : tensor_ops(tf32 || type != VendorType::kF32), arena(&arena) {
    const cudnnDataType_t t = cudnn_type(type);
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, t, d.n, d.c, d.h, d.w));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, t, d.n, d.k, d.p(), d.q()));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, d.k, 1, 1));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NHWC, d.k, d.c, d.r, d.s));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, d.pad_h, d.pad_w, d.stride_h, d.stride_w, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // DEFAULT lets cuDNN use TF32 tensor cores for fp32 on Ampere and newer; FMA forbids them. 16-bit data
    // runs on tensor cores with fp32 accumulation (the convolution descriptor's compute type).
    CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv, type != VendorType::kF32 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    if (type != VendorType::kF32) dw16 = arena.alloc(static_cast<size_t>(d.k) * d.r * d.s * d.c * 2);
  }
  ~Plan() {
    if (dw16) arena->release(dw16);
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
};

CudnnConv::CudnnConv(VendorContext& ctx) : ctx_(ctx) {
  CUDNN_CHECK(cudnnCreate(&handle_));
  CUDNN_CHECK(cudnnSetStream(handle_, ctx_.stream));
}

CudnnConv::~CudnnConv() {
  if (handle_) cudnnDestroy(handle_);
}

CudnnConv::Plan& CudnnConv::plan(const ConvDesc& d, VendorType type) {
  const ShapeCache<std::unique_ptr<Plan>>::Key key{d.n,        d.h,        d.w,     d.c,     d.k,
                                                   d.r,        d.s,        d.stride_h, d.stride_w, d.pad_h,
                                                   d.pad_w,    static_cast<int64_t>(type)};
  return *plans_.get(key, [&] { return std::make_unique<Plan>(d, type, ctx_.tf32, *ctx_.arena); });
}

const AlgoChoice& CudnnConv::choose(Plan& p, Dir dir, const void* x, const void* w, const void* y) {
  if (p.chosen[dir]) return p.choice[dir];
  constexpr int kMax = 16;
  int count = 0;
  std::vector<AlgoCandidate> cands;
  // A timed search writes its output: the filter gradient must not be clobbered, so it gets scratch.
  void* scratch = nullptr;
  if (ctx_.search) {
    void* ws = ctx_.workspace(ctx_.policy.workspace_cap);
    if (dir == kFwd) {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle_, p.x, x, p.w, w, p.conv, p.y,
                                                         const_cast<void*>(y), kMax, &count, perf, ws,
                                                         ctx_.policy.workspace_cap));
      cands = candidates(perf, count, p.tensor_ops);
    } else if (dir == kBwdData) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, p.w, w, p.y, y, p.conv, p.x,
                                                              const_cast<void*>(x), kMax, &count, perf, ws,
                                                              ctx_.policy.workspace_cap));
      cands = candidates(perf, count, p.tensor_ops);
    } else {
      size_t bytes = 0;
      CUDNN_CHECK(cudnnGetFilterSizeInBytes(p.w, &bytes));
      scratch = ctx_.arena->alloc(bytes);
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle_, p.x, x, p.y, y, p.conv, p.w, scratch, kMax,
                                                                &count, perf, ws, ctx_.policy.workspace_cap));
      cands = candidates(perf, count, p.tensor_ops);
    }
  } else if (dir == kFwd) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.x, p.w, p.conv, p.y, kMax, &count, perf));
    cands = candidates(perf, count, p.tensor_ops);
    for (AlgoCandidate& c : cands)  // the heuristics' memory field is an estimate; ask for the real size
      if (c.ok && cudnnGetConvolutionForwardWorkspaceSize(handle_, p.x, p.w, p.conv, p.y,
                                                          static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                                          &c.workspace) != CUDNN_STATUS_SUCCESS)
        c.ok = false;
  } else if (dir == kBwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.w, p.y, p.conv, p.x, kMax, &count, perf));
    cands = candidates(perf, count, p.tensor_ops);
    for (AlgoCandidate& c : cands)
      if (c.ok && cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, p.w, p.y, p.conv, p.x,
                                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                                               &c.workspace) != CUDNN_STATUS_SUCCESS)
        c.ok = false;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.x, p.y, p.conv, p.w, kMax, &count, perf));
    cands = candidates(perf, count, p.tensor_ops);
    for (AlgoCandidate& c : cands)
      if (c.ok && cudnnGetConvolutionBackwardFilterWorkspaceSize(
                      handle_, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                      &c.workspace) != CUDNN_STATUS_SUCCESS)
        c.ok = false;
  }
  if (scratch) {
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // the search ran on the stream; then the scratch is free
    ctx_.arena->release(scratch);
  }
  p.choice[dir] = choose_algo(cands, ctx_.policy);
  p.chosen[dir] = true;
  return p.choice[dir];
}

bool CudnnConv::run_forward(VendorType type, const ConvDesc& d, const void* x, const void* w, void* y) {
  Plan& p = plan(d, type);
  const AlgoChoice& a = choose(p, kFwd, x, w, y);
  if (!a.found()) {
    ctx_.fallbacks->note(ctx_.layer, "cuDNN convolution forward", a.why_none);
    return false;
  }
  CUDNN_CHECK(cudnnConvolutionForward(handle_, &kOne, p.x, x, p.w, w, p.conv,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ctx_.workspace(a.workspace),
                                      a.workspace, &kZero, p.y, y));
  return true;
}

bool CudnnConv::run_backward_data(VendorType type, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  Plan& p = plan(d, type);
  const AlgoChoice& a = choose(p, kBwdData, dx, w, dy);
  if (!a.found()) {
    ctx_.fallbacks->note(ctx_.layer, "cuDNN convolution backward-data", a.why_none);
    return false;
  }
  CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &kOne, p.w, w, p.y, dy, p.conv,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                                           ctx_.workspace(a.workspace), a.workspace, &kZero, p.x, dx));
  return true;
}

bool CudnnConv::run_backward_filter(VendorType type, const ConvDesc& d, const void* x, const void* dy, void* dw,
                                    float beta) {
  Plan& p = plan(d, type);
  const AlgoChoice& a = choose(p, kBwdFilter, x, nullptr, dy);
  if (!a.found()) {
    ctx_.fallbacks->note(ctx_.layer, "cuDNN convolution backward-filter", a.why_none);
    return false;
  }
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &kOne, p.x, x, p.y, dy, p.conv,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                             ctx_.workspace(a.workspace), a.workspace, &beta, p.w, dw));
  return true;
}

bool CudnnConv::forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) {
  CNN_CHECK(!b || t == DType::kF32, "cuDNN convolution forward: a bias needs fp32 data (16-bit: custom kernel)");
  if (!run_forward(vendor_type(t), d, x, w, y)) return false;
  const Plan& p = plan(d, vendor_type(t));
  if (b) CUDNN_CHECK(cudnnAddTensor(handle_, &kOne, p.bias, b, &kOne, p.y, y));
  return true;
}

bool CudnnConv::backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  return run_backward_data(vendor_type(t), d, dy, w, dx);
}

bool CudnnConv::backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw) {
  if (t == DType::kF32) return run_backward_filter(VendorType::kF32, d, x, dy, dw, 1.f);  // beta 1: accumulates
  Plan& p = plan(d, vendor_type(t));
  if (!run_backward_filter(vendor_type(t), d, x, dy, p.dw16, 0.f)) return false;
  CUDA_CHECK(add_widened_cuda(t, static_cast<size_t>(d.k) * d.r * d.s * d.c, p.dw16, dw, ctx_.stream));
  return true;
}

}  // namespace gpu
}  // namespace cnn
