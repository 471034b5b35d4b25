#include "kernels/cpu/host_mixed_backend.h"

namespace cnn {

float* HostMixedBackend::widen(int slot, DType t, const void* x, size_t n) {
  float* s = scratch(slot, n);
  convert_host(threads_, n, t, x, DType::kF32, s);
  return s;
}

float* HostMixedBackend::scratch(int slot, size_t n) {
  std::vector<float>& v = scratch_[slot];
  if (v.size() < n) v.resize(n);
  return v.data();
}

void HostMixedBackend::narrow(DType t, const float* x, void* y, size_t n) {
  convert_host(threads_, n, DType::kF32, x, t, y);
}

void HostMixedBackend::convert(size_t n, DType from, const void* x, DType to, void* y) {
  convert_host(threads_, n, from, x, to, y);
}

}  // namespace cnn
