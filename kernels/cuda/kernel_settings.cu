// The per-stream KernelSettings of cuda_common.h. Looked up at every launch that depends on them (a shared
// lock and a hash lookup, small beside a launch); written only when a backend is created or destroyed.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "kernels/cuda/cuda_common.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::unordered_map<cudaStream_t, KernelSettings> by_stream;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool tensor_cores_allowed_by_env() {
  static const bool allowed = [] {
    const char* e = std::getenv("CNNTRAIN_CUDA_GEMM");
    return !(e && std::strcmp(e, "simt") == 0);
  }();
  return allowed;
}

void register_kernel_settings(cudaStream_t stream, const KernelSettings& s) {
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.by_stream[stream] = s;
}

void forget_kernel_settings(cudaStream_t stream) {
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.by_stream.erase(stream);
}

KernelSettings kernel_settings(cudaStream_t stream) {
  Registry& r = registry();
  {
    std::shared_lock<std::shared_mutex> lock(r.mu);
    const auto it = r.by_stream.find(stream);
    if (it != r.by_stream.end()) return it->second;
  }
  KernelSettings defaults;
  defaults.tensor_cores = tensor_cores_allowed_by_env();
  return defaults;
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
