// The vendor libraries' API for the nvcc build, resolved at run time: every cuDNN and cuBLASLt function the
// plugin calls (NCCL's: src/comm/nccl_lazy.h, the same way) is a function-like macro that fetches the function from the library (dlopen on the first
// call of any, dlsym once per call site: kernels/cuda/vendor/vendor_loader.h) and calls it. Call sites stay as they are,
// and every signature is the vendor header's: a macro does not expand inside its own expansion, so
// decltype(&::cudnnCreate) names the header's declaration. Include this instead of <cudnn.h> or <cublasLt.h>
// (it includes them first, so that no later include sees the macros). A function called without a macro
// here would be a link-time dependency again: `make cuda-link-check` fails on any cudnn*/cublasLt*/nccl*
// symbol the plugin leaves undefined.
#pragma once
#include <cublasLt.h>
#include <cudnn.h>

#include "kernels/cuda/vendor/vendor_loader.h"

namespace cnn {
namespace gpu {

template <class Fn>
Fn vendor_fn(VendorLib lib, const char* name) {
  return reinterpret_cast<Fn>(vendor_loader().symbol(lib, name));
}

}  // namespace gpu
}  // namespace cnn

// The function `name` of library `lib` (a VendorLib enumerator), looked up once per call site.
#define CNN_VENDOR_FN(lib, name)                                                       \
  ([] {                                                                                \
    static const auto cnn_vendor_fn_ =                                                 \
        ::cnn::gpu::vendor_fn<decltype(&::name)>(::cnn::gpu::VendorLib::lib, #name);   \
    return cnn_vendor_fn_;                                                             \
  }())
#define CNN_CUDNN(name) CNN_VENDOR_FN(kCudnn, name)
#define CNN_CUBLASLT(name) CNN_VENDOR_FN(kCublasLt, name)

// cuDNN
#define cudnnAddTensor(...) CNN_CUDNN(cudnnAddTensor)(__VA_ARGS__)
#define cudnnBatchNormalizationBackward(...) CNN_CUDNN(cudnnBatchNormalizationBackward)(__VA_ARGS__)
#define cudnnBatchNormalizationForwardInference(...) \
  CNN_CUDNN(cudnnBatchNormalizationForwardInference)(__VA_ARGS__)
#define cudnnBatchNormalizationForwardTraining(...) CNN_CUDNN(cudnnBatchNormalizationForwardTraining)(__VA_ARGS__)
#define cudnnConvolutionBackwardData(...) CNN_CUDNN(cudnnConvolutionBackwardData)(__VA_ARGS__)
#define cudnnConvolutionBackwardFilter(...) CNN_CUDNN(cudnnConvolutionBackwardFilter)(__VA_ARGS__)
#define cudnnConvolutionForward(...) CNN_CUDNN(cudnnConvolutionForward)(__VA_ARGS__)
#define cudnnCreate(...) CNN_CUDNN(cudnnCreate)(__VA_ARGS__)
#define cudnnCreateConvolutionDescriptor(...) CNN_CUDNN(cudnnCreateConvolutionDescriptor)(__VA_ARGS__)
#define cudnnCreateFilterDescriptor(...) CNN_CUDNN(cudnnCreateFilterDescriptor)(__VA_ARGS__)
#define cudnnCreateTensorDescriptor(...) CNN_CUDNN(cudnnCreateTensorDescriptor)(__VA_ARGS__)
#define cudnnDeriveBNTensorDescriptor(...) CNN_CUDNN(cudnnDeriveBNTensorDescriptor)(__VA_ARGS__)
#define cudnnDestroy(...) CNN_CUDNN(cudnnDestroy)(__VA_ARGS__)
#define cudnnDestroyConvolutionDescriptor(...) CNN_CUDNN(cudnnDestroyConvolutionDescriptor)(__VA_ARGS__)
#define cudnnDestroyFilterDescriptor(...) CNN_CUDNN(cudnnDestroyFilterDescriptor)(__VA_ARGS__)
#define cudnnDestroyTensorDescriptor(...) CNN_CUDNN(cudnnDestroyTensorDescriptor)(__VA_ARGS__)
#define cudnnFindConvolutionBackwardDataAlgorithmEx(...) \
  CNN_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx)(__VA_ARGS__)
#define cudnnFindConvolutionBackwardFilterAlgorithmEx(...) \
  CNN_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx)(__VA_ARGS__)
#define cudnnFindConvolutionForwardAlgorithmEx(...) CNN_CUDNN(cudnnFindConvolutionForwardAlgorithmEx)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardDataAlgorithm_v7(...) \
  CNN_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardDataWorkspaceSize(...) \
  CNN_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardFilterAlgorithm_v7(...) \
  CNN_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionBackwardFilterWorkspaceSize(...) \
  CNN_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize)(__VA_ARGS__)
#define cudnnGetConvolutionForwardAlgorithm_v7(...) CNN_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7)(__VA_ARGS__)
#define cudnnGetConvolutionForwardWorkspaceSize(...) \
  CNN_CUDNN(cudnnGetConvolutionForwardWorkspaceSize)(__VA_ARGS__)
#define cudnnGetErrorString(...) CNN_CUDNN(cudnnGetErrorString)(__VA_ARGS__)
#define cudnnGetLastErrorString(...) CNN_CUDNN(cudnnGetLastErrorString)(__VA_ARGS__)
#define cudnnGetFilterSizeInBytes(...) CNN_CUDNN(cudnnGetFilterSizeInBytes)(__VA_ARGS__)
#define cudnnSetConvolution2dDescriptor(...) CNN_CUDNN(cudnnSetConvolution2dDescriptor)(__VA_ARGS__)
#define cudnnSetConvolutionGroupCount(...) CNN_CUDNN(cudnnSetConvolutionGroupCount)(__VA_ARGS__)
#define cudnnSetConvolutionMathType(...) CNN_CUDNN(cudnnSetConvolutionMathType)(__VA_ARGS__)
#define cudnnSetFilter4dDescriptor(...) CNN_CUDNN(cudnnSetFilter4dDescriptor)(__VA_ARGS__)
#define cudnnSetStream(...) CNN_CUDNN(cudnnSetStream)(__VA_ARGS__)
#define cudnnSetTensor4dDescriptor(...) CNN_CUDNN(cudnnSetTensor4dDescriptor)(__VA_ARGS__)

// cuBLASLt
#define cublasLtCreate(...) CNN_CUBLASLT(cublasLtCreate)(__VA_ARGS__)
#define cublasLtDestroy(...) CNN_CUBLASLT(cublasLtDestroy)(__VA_ARGS__)
#define cublasLtGetStatusName(...) CNN_CUBLASLT(cublasLtGetStatusName)(__VA_ARGS__)
#define cublasLtGetStatusString(...) CNN_CUBLASLT(cublasLtGetStatusString)(__VA_ARGS__)
#define cublasLtMatmul(...) CNN_CUBLASLT(cublasLtMatmul)(__VA_ARGS__)
#define cublasLtMatmulAlgoGetHeuristic(...) CNN_CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(__VA_ARGS__)
#define cublasLtMatmulDescCreate(...) CNN_CUBLASLT(cublasLtMatmulDescCreate)(__VA_ARGS__)
#define cublasLtMatmulDescDestroy(...) CNN_CUBLASLT(cublasLtMatmulDescDestroy)(__VA_ARGS__)
#define cublasLtMatmulDescSetAttribute(...) CNN_CUBLASLT(cublasLtMatmulDescSetAttribute)(__VA_ARGS__)
#define cublasLtMatmulPreferenceCreate(...) CNN_CUBLASLT(cublasLtMatmulPreferenceCreate)(__VA_ARGS__)
#define cublasLtMatmulPreferenceDestroy(...) CNN_CUBLASLT(cublasLtMatmulPreferenceDestroy)(__VA_ARGS__)
#define cublasLtMatmulPreferenceSetAttribute(...) CNN_CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(__VA_ARGS__)
#define cublasLtMatrixLayoutCreate(...) CNN_CUBLASLT(cublasLtMatrixLayoutCreate)(__VA_ARGS__)
#define cublasLtMatrixLayoutDestroy(...) CNN_CUBLASLT(cublasLtMatrixLayoutDestroy)(__VA_ARGS__)
