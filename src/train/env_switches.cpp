#include "src/train/env_switches.h"

#include <cstdlib>

namespace cnn {

std::vector<std::string> result_env_switches() {
  // The variables read by the kernels (kernels/cpu/cpu_backend.cpp, kernels/cpu/dnnl_ops.cpp, kernels/cuda/linear.cu).
  static const char* const kNames[] = {"CNNTRAIN_CPU_KERNELS", "CNNTRAIN_WINOGRAD", "CNNTRAIN_MIN_PARALLEL_MFLOP",
                                       "CNNTRAIN_CUDA_GEMM"};
  std::vector<std::string> set;
  for (const char* name : kNames)
    if (const char* v = std::getenv(name)) set.push_back(std::string(name) + "=" + v);
  return set;
}

}  // namespace cnn
