// CPU backend variants. make_cpu_backend(threads) (backend.h) is the fast one: convolution and matmul on
// oneDNN (kernels/cpu/dnnl_ops.h), batch norm, element-wise, pooling, dropout and optimizer ops multithreaded
// (kernels/cpu/fast_cpu.h). The
// reference variant runs the plain loops of kernels/*_cpu.cpp (the test oracle). CNNTRAIN_CPU_KERNELS=reference
// in the environment makes make_cpu_backend() return the reference variant (for debugging a suspected kernel bug).
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace cnn {

enum class CpuKernels { kFast, kReference };

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuKernels kernels);

// Empty when the fast CPU backend computes activations of type t with native kernels; otherwise why not
// (bf16 needs AVX512-BF16 or AMX; fp16 always runs, converting to fp32 around oneDNN's fp32 kernels, which
// saves memory but not time).
std::string cpu_precision_unsupported(DType t);

}  // namespace cnn
