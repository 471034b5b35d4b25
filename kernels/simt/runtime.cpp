// Host runtime API of the SIMT emulator: device memory is host memory that cudaMalloc fills with 0xFF bytes
// (NaN as float/double) and whose bounds the copy functions check, so that a kernel reading memory nobody
// wrote, or a copy that runs past an allocation, fails a test instead of passing by luck.
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/simt/internal.h"

namespace simt {

namespace {

// Deliberately few multiprocessors by default: grids sized from the SM count stay small, and blocks run one at
// a time. A test can report a real GPU's count (132 for an H100) to run the launch shapes that GPU gets.
int initial_sm_count() {
  const char* env = std::getenv("CNNTRAIN_SIMT_SM_COUNT");
  const int n = env ? std::atoi(env) : 0;
  return n >= 1 && n <= 4096 ? n : 4;
}
std::atomic<int> g_sm_count{initial_sm_count()};
std::atomic<bool> g_quiet{std::getenv("CNNTRAIN_SIMT_QUIET") && std::getenv("CNNTRAIN_SIMT_QUIET")[0] == '1'};

struct ErrorState {
  cudaError_t last = cudaSuccess;
  cudaError_t pending = cudaSuccess;
  std::string message;
};
ErrorState& errors() {
  static thread_local ErrorState s;
  return s;
}

// Live device allocations, start -> size; guarded because host threads may allocate concurrently.
std::mutex g_mem_mutex;
std::map<uintptr_t, size_t> g_allocs;
size_t g_bytes_in_use = 0;

std::mutex g_attr_mutex;
std::map<const void*, size_t> g_dyn_shared_optin;

constexpr size_t kAlign = 256;  // cudaMalloc's guaranteed alignment

// Whether [p, p + bytes) lies inside one live allocation.
bool inside_allocation(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  return detail::inside_one(g_allocs, p, bytes);
}

cudaError_t api_error(cudaError_t code, const std::string& message) {
  return detail::record_error(code, message, detail::ErrorKind::kApi);
}

std::atomic<bool> g_strict_device{std::getenv("CNNTRAIN_SIMT_STRICT_DEVICE") &&
                                  std::getenv("CNNTRAIN_SIMT_STRICT_DEVICE")[0] == '1'};
std::atomic<long> g_unselected_calls{0};
thread_local bool t_device_selected = false;

cudaError_t check_range(const char* fn, const char* which, const void* p, size_t bytes) {
  if (bytes == 0 || inside_allocation(p, bytes)) return cudaSuccess;
  return api_error(cudaErrorInvalidValue, detail::format("%s: %s range [%p, +%zu) is not inside one cudaMalloc "
                                                         "allocation",
                                                         fn, which, p, bytes));
}

}  // namespace

std::string last_error_message() { return errors().message; }
void set_strict_device_selection(bool strict) { g_strict_device.store(strict); }
long unselected_device_calls() { return g_unselected_calls.load(); }
void set_quiet(bool quiet) { g_quiet.store(quiet); }
void set_multiprocessor_count(int n) { g_sm_count.store(n >= 1 ? n : 4); }
int multiprocessor_count() { return g_sm_count.load(); }
size_t device_bytes_in_use() {
  std::lock_guard<std::mutex> lock(g_mem_mutex);
  return g_bytes_in_use;
}

namespace detail {

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

cudaError_t record_error(cudaError_t code, const std::string& message, ErrorKind kind) {
  ErrorState& e = errors();
  e.message = message;
  if (kind == ErrorKind::kApi) e.last = code;
  if (kind == ErrorKind::kKernelFault) e.pending = code;
  if (!g_quiet.load()) std::fprintf(stderr, "simt: %s: %s\n", cudaGetErrorName(code), message.c_str());
  return code;
}

cudaError_t check_device_selected(const char* fn) {
  if (t_device_selected || !g_strict_device.load()) return cudaSuccess;
  ++g_unselected_calls;
  return api_error(cudaErrorDeviceUninitialized,
                   format("%s on a host thread that never called cudaSetDevice: on a GPU it would run on device 0 "
                          "whatever device this rank bound (call cudaSetDevice with the rank's device first on "
                          "every thread that calls CUDA; strict device mode, CNNTRAIN_SIMT_STRICT_DEVICE)",
                          fn));
}

cudaError_t take_pending_error() {
  ErrorState& e = errors();
  const cudaError_t code = e.pending;
  e.pending = cudaSuccess;
  return code;
}

size_t max_dynamic_shared(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_attr_mutex);
  auto it = g_dyn_shared_optin.find(kernel);
  return it == g_dyn_shared_optin.end() ? kSharedDefaultLimit : it->second;
}

bool shared_opted_in(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_attr_mutex);
  return g_dyn_shared_optin.count(kernel) != 0;
}

}  // namespace detail
}  // namespace simt

namespace simt {
namespace runtime {

using detail::format;

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t e = detail::check_device_selected("cudaMalloc")) return e;
  if (!ptr) return api_error(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
  // Exactly `bytes`, not rounded up, so that an AddressSanitizer build flags the first byte past the end.
  void* p = nullptr;
  if (posix_memalign(&p, kAlign, std::max<size_t>(bytes, 1)) != 0) {
    return api_error(cudaErrorMemoryAllocation, format("cudaMalloc: out of memory for %zu bytes", bytes));
  }
  std::memset(p, 0xFF, bytes);
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    g_allocs[reinterpret_cast<uintptr_t>(p)] = bytes;
    g_bytes_in_use += bytes;
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (cudaError_t e = detail::check_device_selected("cudaFree")) return e;
  detail::synchronize_all();  // as on a GPU: queued work may still use the memory
  {
    std::lock_guard<std::mutex> lock(g_mem_mutex);
    auto it = g_allocs.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != g_allocs.end()) {
      g_bytes_in_use -= it->second;
      g_allocs.erase(it);
      std::free(ptr);
      return cudaSuccess;
    }
  }
  return api_error(cudaErrorInvalidValue, format("cudaFree(%p): not the start of a cudaMalloc allocation", ptr));
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned) {
  if (cudaError_t e = detail::check_device_selected("cudaHostAlloc")) return e;
  if (!ptr) return api_error(cudaErrorInvalidValue, "cudaHostAlloc: null result pointer");
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  *ptr = std::aligned_alloc(kAlign, rounded);
  if (!*ptr) return api_error(cudaErrorMemoryAllocation, format("cudaHostAlloc: out of memory for %zu bytes", bytes));
  detail::note_pinned(*ptr, rounded);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  detail::synchronize_all();
  detail::forget_pinned(ptr);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = detail::check_device_selected("cudaMemGetInfo")) return e;
  const size_t total = size_t{16} << 30;
  const size_t used = device_bytes_in_use();
  if (free_bytes) *free_bytes = used < total ? total - used : 0;
  if (total_bytes) *total_bytes = total;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = detail::check_device_selected("cudaMemcpy")) return e;
  detail::synchronize_all();
  if (cudaError_t e = detail::take_pending_error(); e != cudaSuccess) return e;
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = detail::check_device_selected("cudaMemcpyAsync")) return e;
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return api_error(cudaErrorInvalidValue, "cudaMemcpy: null pointer");
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return api_error(cudaErrorInvalidValue, format("cudaMemcpy: bad kind %d", static_cast<int>(kind)));
  }
  if (kind == cudaMemcpyDefault) {  // unified addressing: the pointers say where they live
    const bool d = inside_allocation(dst, bytes), s = inside_allocation(src, bytes);
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev) {
    if (cudaError_t e = check_range("cudaMemcpy", "destination", dst, bytes)) return e;
  }
  if (src_dev) {
    if (cudaError_t e = check_range("cudaMemcpy", "source", src, bytes)) return e;
  }
  if (!detail::deferred_streams()) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  // As CUDA does with pageable host memory: the source is read before the call returns, and a copy into
  // pageable memory has finished when it returns. Pinned memory is read and written when the stream gets there.
  if (!src_dev && !detail::is_pinned(src, bytes)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    return detail::submit_work(stream, [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return cudaSuccess;
    });
  }
  detail::submit_work(stream, [dst, src, bytes] {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
  if (!dst_dev && !detail::is_pinned(dst, bytes)) detail::synchronize_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (cudaError_t e = detail::check_device_selected("cudaMemset")) return e;
  detail::synchronize_all();
  if (cudaError_t e = detail::take_pending_error(); e != cudaSuccess) return e;
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = detail::check_device_selected("cudaMemsetAsync")) return e;
  if (cudaError_t e = check_range("cudaMemset", "destination", ptr, bytes)) return e;
  return detail::submit_work(stream, [ptr, value, bytes] {
    std::memset(ptr, value, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceReset() {
  detail::synchronize_all();
  errors() = ErrorState{};
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  ErrorState& e = errors();
  const cudaError_t code = e.last != cudaSuccess ? e.last : e.pending;
  e.last = cudaSuccess;
  e.pending = cudaSuccess;
  return code;
}

cudaError_t cudaPeekAtLastError() {
  const ErrorState& e = errors();
  return e.last != cudaSuccess ? e.last : e.pending;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorDeviceUninitialized: return "cudaErrorDeviceUninitialized";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorDeviceUninitialized: return "invalid device context";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
  }
  return "unknown error";
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return api_error(cudaErrorInvalidValue, "cudaGetDeviceCount: null result pointer");
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) {
    return api_error(cudaErrorInvalidDevice, format("cudaSetDevice(%d): the emulator is device 0", device));
  }
  t_device_selected = true;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (!device) return api_error(cudaErrorInvalidValue, "cudaGetDevice: null result pointer");
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop || device != 0) return api_error(cudaErrorInvalidDevice, "cudaGetDeviceProperties: bad device");
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "cnntrain SIMT emulator");
  prop->totalGlobalMem = size_t{16} << 30;
  prop->sharedMemPerBlock = kSharedDefaultLimit;
  prop->sharedMemPerBlockOptin = kSharedOptinLimit;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7FFFFFFF;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = simt::multiprocessor_count();
  prop->major = 8;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (!value) return api_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: null result pointer");
  if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); return cudaSuccess;
    case cudaDevAttrWarpSize: *value = p.warpSize; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      return cudaSuccess;
  }
  return api_error(cudaErrorInvalidValue, format("cudaDeviceGetAttribute: attribute %d not emulated", attr));
}

cudaError_t cudaDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
  if (!pci_bus_id || len < 13 || device != 0)
    return api_error(cudaErrorInvalidValue, "cudaDeviceGetPCIBusId: bad buffer or device");
  std::snprintf(pci_bus_id, static_cast<size_t>(len), "0000:00:00.0");
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func) return api_error(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute: null function");
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) {
    return api_error(cudaErrorInvalidValue, format("cudaFuncSetAttribute: attribute %d not emulated", attr));
  }
  if (value < 0 || static_cast<size_t>(value) > kSharedOptinLimit) {
    return api_error(cudaErrorInvalidValue, format("cudaFuncSetAttribute: %d bytes of dynamic shared memory, at "
                                                   "most %zu portable to sm_80",
                                                   value, kSharedOptinLimit));
  }
  std::lock_guard<std::mutex> lock(g_attr_mutex);
  g_dyn_shared_optin[func] = static_cast<size_t>(value);
  return cudaSuccess;
}

}  // namespace runtime
}  // namespace simt
