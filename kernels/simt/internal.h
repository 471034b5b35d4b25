// Shared between the emulator's scheduler and its runtime API; not for kernel or backend code.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "kernels/simt/simt.h"

namespace simt {
namespace detail {

// Where an error goes besides last_error_message() and stderr (unless quiet): a failed runtime call sets
// the error cudaGetLastError returns; a launch's own configuration error is only returned by CNN_LAUNCH,
// whose nvcc form consumes it with cudaGetLastError; a fault while the kernel ran is returned by CNN_LAUNCH
// and again by the next synchronising call (or cudaGetLastError), as a GPU would report it.
enum class ErrorKind { kApi, kLaunch, kKernelFault };
cudaError_t record_error(cudaError_t code, const std::string& message, ErrorKind kind);

// Returns and clears the kernel fault waiting for a synchronising call.
cudaError_t take_pending_error();

// Strict device selection (cuda_runtime_emu.h): the error `fn` must return on this thread, or cudaSuccess.
cudaError_t check_device_selected(const char* fn);

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Whether [p, p + bytes) lies inside one of `ranges` (start address -> length); the caller holds its lock.
inline bool inside_one(const std::map<uintptr_t, size_t>& ranges, const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = ranges.upper_bound(a);
  if (it == ranges.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

// Streams (streams.cpp). With deferred streams off, submit_work runs `work` at once and returns its error;
// on, it queues it on the stream (the null stream is one more stream) and returns success.
bool deferred_streams();
cudaError_t submit_work(cudaStream_t stream, std::function<cudaError_t()> work);
// Runs queued work until every stream is empty / until `stream` is (no-ops with deferred streams off).
void synchronize_all();
void synchronize_stream(cudaStream_t stream);
// Pinned host memory (cudaHostAlloc), which asynchronous copies read and write when the stream gets there.
void note_pinned(const void* p, size_t bytes);
void forget_pinned(const void* p);
bool is_pinned(const void* p, size_t bytes);

// Largest dynamic shared memory a kernel may launch with (cudaFuncSetAttribute opt-in, else 48 KiB).
size_t max_dynamic_shared(const void* kernel);
bool shared_opted_in(const void* kernel);

}  // namespace detail
}  // namespace simt
