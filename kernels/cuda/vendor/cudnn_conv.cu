#include "kernels/cuda/vendor/cudnn_conv.h"

#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/vendor/vendor_check.h"
#include "src/base/error.h"

namespace cnn {
namespace gpu {

namespace {

const float kOne = 1.f;

size_t filter_elements(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups); }

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

// The descriptors of one problem shape (a plan's, see CudnnConv::Plan).
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// The three directions' calls of cuDNN's legacy API on operands (a, b) -> out: forward (x, w) -> y, backward
// data (w, dy) -> dx, backward filter (x, dy) -> dw. One routine chooses and runs them all (list_algos, run).
struct Forward {
  static constexpr int kIndex = 0;  // of the plan's choices
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr const char* kWhat = "cuDNN convolution forward";
  static void find(cudnnHandle_t h, const Descriptors& p, const void* x, const void* w, void* y, int max, int* count,
                   Perf* perf, void* ws, size_t cap) {
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, p.x, x, p.w, w, p.conv, p.y, y, max, count, perf, ws, cap));
  }
  static void heuristics(cudnnHandle_t h, const Descriptors& p, int max, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, max, count, perf));
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
  }
  static void run(cudnnHandle_t h, const Descriptors& p, int algo, void* ws, size_t bytes, const void* x,
                  const void* w, float beta, void* y) {
    CUDNN_CHECK(cudnnConvolutionForward(h, &kOne, p.x, x, p.w, w, p.conv, static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                        ws, bytes, &beta, p.y, y));
  }
};

struct BackwardData {
  static constexpr int kIndex = 1;  // of the plan's choices
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr const char* kWhat = "cuDNN convolution backward-data";
  static void find(cudnnHandle_t h, const Descriptors& p, const void* w, const void* dy, void* dx, int max,
                   int* count, Perf* perf, void* ws, size_t cap) {
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, w, p.y, dy, p.conv, p.x, dx, max, count, perf,
                                                            ws, cap));
  }
  static void heuristics(cudnnHandle_t h, const Descriptors& p, int max, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x, max, count, perf));
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.conv, p.x,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
  }
  static void run(cudnnHandle_t h, const Descriptors& p, int algo, void* ws, size_t bytes, const void* w,
                  const void* dy, float beta, void* dx) {
    CUDNN_CHECK(cudnnConvolutionBackwardData(h, &kOne, p.w, w, p.y, dy, p.conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes, &beta, p.x,
                                             dx));
  }
};

struct BackwardFilter {
  static constexpr int kIndex = 2;  // of the plan's choices
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr const char* kWhat = "cuDNN convolution backward-filter";
  static void find(cudnnHandle_t h, const Descriptors& p, const void* x, const void* dy, void* dw, int max,
                   int* count, Perf* perf, void* ws, size_t cap) {
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x, x, p.y, dy, p.conv, p.w, dw, max, count, perf,
                                                              ws, cap));
  }
  static void heuristics(cudnnHandle_t h, const Descriptors& p, int max, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w, max, count, perf));
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& p, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, p.conv, p.w,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
  static void run(cudnnHandle_t h, const Descriptors& p, int algo, void* ws, size_t bytes, const void* x,
                  const void* dy, float beta, void* dw) {
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &kOne, p.x, x, p.y, dy, p.conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes, &beta,
                                               p.w, dw));
  }
};

// The candidates of one direction: timed on (a, b) -> out when `ws` (the search's workspace, `cap` bytes) is
// given, else cuDNN's heuristics with each workspace size asked for (their memory field is an estimate).
template <class Dir>
std::vector<AlgoCandidate> list_algos(cudnnHandle_t h, const Descriptors& p, bool tensor_ops, const void* a,
                                      const void* b, void* out, void* ws, size_t cap) {
  constexpr int kMax = 16;
  typename Dir::Perf perf[kMax];
  int count = 0;
  if (ws) {
    Dir::find(h, p, a, b, out, kMax, &count, perf, ws, cap);
    return candidates(perf, count, tensor_ops);
  }
  Dir::heuristics(h, p, kMax, &count, perf);
  std::vector<AlgoCandidate> v = candidates(perf, count, tensor_ops);
  for (AlgoCandidate& c : v)
    if (c.ok && Dir::workspace(h, p, c.algo, &c.workspace) != CUDNN_STATUS_SUCCESS) c.ok = false;
  return v;
}

}  // namespace

struct CudnnConv::Plan : Descriptors {
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
    // Grouped filters: [k, r, s, c/groups] in NHWC terms, the group count on the convolution descriptor.
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NHWC, d.k, d.c / d.groups, d.r, d.s));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, d.pad_h, d.pad_w, d.stride_h, d.stride_w, d.dilation_h,
                                                d.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, d.groups));
    // DEFAULT lets cuDNN use TF32 tensor cores for fp32 on Ampere and newer; FMA forbids them. 16-bit data
    // runs on tensor cores with fp32 accumulation (the convolution descriptor's compute type).
    CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv, type != VendorType::kF32 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    if (type != VendorType::kF32) dw16 = arena.alloc(filter_elements(d) * 2);
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
  const ShapeCache<std::unique_ptr<Plan>>::Key key{d.n,          d.h,          d.w,        d.c,        d.k,
                                                   d.r,          d.s,          d.stride_h, d.stride_w, d.pad_h,
                                                   d.pad_w,      d.groups,     d.dilation_h, d.dilation_w,
                                                   static_cast<int64_t>(type)};
  return *plans_.get(key, [&] { return std::make_unique<Plan>(d, type, ctx_.tf32, *ctx_.arena); });
}

template <class Dir>
bool CudnnConv::run(VendorType type, const ConvDesc& d, const void* a, const void* b, void* out, float beta) {
  // cuDNN pads both sides alike: asymmetric padding (ONNX pads with more after the input) takes the custom
  // kernels, as a problem without a cuDNN algorithm does.
  if (d.extra_pad_h != 0 || d.extra_pad_w != 0) {
    ctx_.fallbacks->note(ctx_.layer, Dir::kWhat, "asymmetric padding (cuDNN pads both sides alike)");
    return false;
  }
  Plan& p = plan(d, type);
  constexpr int dir = Dir::kIndex;
  if (!p.chosen[dir]) {
    // A timed search writes its output: the filter gradient accumulates (beta), so it searches on scratch.
    const size_t cap = ctx_.policy.workspace_cap;
    void* ws = ctx_.search ? ctx_.workspace(cap) : nullptr;
    void* scratch = nullptr;
    if (ws && std::is_same<Dir, BackwardFilter>::value) {
      size_t bytes = 0;
      CUDNN_CHECK(cudnnGetFilterSizeInBytes(p.w, &bytes));
      scratch = ctx_.arena->alloc(bytes);
    }
    p.choice[dir] = choose_algo(list_algos<Dir>(handle_, p, p.tensor_ops, a, b, scratch ? scratch : out, ws, cap),
                                ctx_.policy);
    p.chosen[dir] = true;
    // The library's first preference ruled out by the workspace cap alone: said once per layer and direction.
    if (!p.choice[dir].passed_over.empty()) ctx_.fallbacks->hint(ctx_.layer, Dir::kWhat, p.choice[dir].passed_over);
    if (scratch) {
      CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // the search ran on the stream; then the scratch is free
      ctx_.arena->release(scratch);
    }
  }
  const AlgoChoice& algo = p.choice[dir];
  if (!algo.found()) {
    ctx_.fallbacks->note(ctx_.layer, Dir::kWhat, algo.why_none);
    return false;
  }
  Dir::run(handle_, p, algo.algo, ctx_.workspace(algo.workspace), algo.workspace, a, b, beta, out);
  return true;
}

bool CudnnConv::forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) {
  CNN_CHECK(!b || t == DType::kF32, "cuDNN convolution forward: a bias needs fp32 data (16-bit: custom kernel)");
  if (!run<Forward>(vendor_type(t), d, x, w, y, 0.f)) return false;
  const Plan& p = plan(d, vendor_type(t));
  if (b) CUDNN_CHECK(cudnnAddTensor(handle_, &kOne, p.bias, b, &kOne, p.y, y));
  return true;
}

bool CudnnConv::backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  return run<BackwardData>(vendor_type(t), d, w, dy, dx, 0.f);
}

bool CudnnConv::backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw) {
  if (t == DType::kF32) return run<BackwardFilter>(VendorType::kF32, d, x, dy, dw, 1.f);  // beta 1: accumulates
  Plan& p = plan(d, vendor_type(t));
  if (!run<BackwardFilter>(vendor_type(t), d, x, dy, p.dw16, 0.f)) return false;
  CUDA_CHECK(add_widened_cuda(t, filter_elements(d), p.dw16, dw, ctx_.stream));
  return true;
}

}  // namespace gpu
}  // namespace cnn
