#include "kernels/cuda/cuda_arena.h"

#include <algorithm>

#include "src/base/error.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

// Under AddressSanitizer (the emulated build of `make test-cuda-asan`) every block is its own exact-size
// cudaMalloc: the emulator's allocations are what ASan guards, so kernels overrunning a tensor get caught
// instead of landing in a neighbour inside the same chunk.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kExactBlocks = true;
#else
constexpr bool kExactBlocks = false;
#endif

}  // namespace

DeviceArena::DeviceArena(size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}

DeviceArena::~DeviceArena() {
  // Errors are ignored here: at exit after a failure the context may already be gone.
  for (void* c : chunks_) cudaFree(c);
  for (const auto& kv : dedicated_) cudaFree(const_cast<void*>(kv.first));
  for (const auto& kv : free_)
    for (const FreeBlock& b : kv.second)
      for (cudaEvent_t e : b.done) cudaEventDestroy(e);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
}

void DeviceArena::add_stream(cudaStream_t stream) {
  if (stream && std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
}

// Whether the work queued before b's release (on its stream, or on every added stream) has finished.
bool DeviceArena::idle(const FreeBlock& b) {
  for (cudaEvent_t e : b.done) {
    const cudaError_t q = cudaEventQuery(e);
    if (q == cudaErrorNotReady) return false;
    CUDA_CHECK(q);
  }
  return true;
}

char* DeviceArena::reuse(size_t size, cudaStream_t stream) {
  auto it = free_.find(size);
  if (it == free_.end()) return nullptr;
  auto& blocks = it->second;
  for (size_t i = blocks.size(); i-- > 0;) {
    FreeBlock& b = blocks[i];
    // Same stream: stream order protects the block. A null stream on either side names no stream.
    if (!(stream && b.stream == stream) && !idle(b)) continue;
    char* p = b.p;
    spare_events_.insert(spare_events_.end(), b.done.begin(), b.done.end());
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
#if CNN_SIMT_EMULATED
    // Under deferred streams a reused block is NaN-filled for its new owner, ordered like the owner's work:
    // work still queued elsewhere that uses it (released on the wrong stream, an event that does not cover it)
    // then reads NaN under some schedules instead of passing by luck. A block for any stream is filled at once.
    if (simt::deferred_streams_seed() != 0)
      CUDA_CHECK(stream ? cudaMemsetAsync(p, 0xFF, size, stream) : cudaMemset(p, 0xFF, size));
#endif
    return p;
  }
  return nullptr;
}

cudaEvent_t DeviceArena::spare_event() {
  cudaEvent_t e = nullptr;
  if (spare_events_.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    e = spare_events_.back();
    spare_events_.pop_back();
  }
  return e;
}

void* DeviceArena::cuda_malloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fatal(kExitFailure, strprintf("out of device memory: cudaMalloc of %.1f MiB failed (%s) with %.1f MiB in use by "
                                  "cnntrain and %.1f of %.1f MiB free on the device; use a smaller --train.batch "
                                  "or model", bytes / 1048576.0, cudaGetErrorString(err), in_use_ / 1048576.0,
                                  free_b / 1048576.0, total_b / 1048576.0));
  }
  ++mallocs_;
  reserved_ += bytes;
  return p;
}

void* DeviceArena::alloc(size_t bytes, cudaStream_t stream) {
  const size_t size = ((bytes ? bytes : 1) + kAlign - 1) / kAlign * kAlign;
  char* p = kExactBlocks ? nullptr : reuse(size, stream);
  if (!p && (kExactBlocks || size > chunk_bytes_ / 2)) {
    const size_t got = kExactBlocks ? (bytes ? bytes : 1) : size;
    p = static_cast<char*>(cuda_malloc(got));
    dedicated_[p] = got;
  } else if (!p) {
    if (size > bump_left_) {  // the old chunk's tail is abandoned; at most half a chunk per chunk
      bump_ = static_cast<char*>(cuda_malloc(chunk_bytes_));
      chunks_.push_back(bump_);
      bump_left_ = chunk_bytes_;
    }
    p = bump_;
    bump_ += size;
    bump_left_ -= size;
  }
  live_[p] = size;
  in_use_ += size;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void DeviceArena::release(void* p, cudaStream_t stream) {
  if (!p) return;
  auto it = live_.find(p);
  CNN_CHECK(it != live_.end(), "release of %p, which the device arena did not allocate (or already released)", p);
  const size_t size = it->second;
  live_.erase(it);
  in_use_ -= size;
  auto d = dedicated_.find(p);
  if (d != dedicated_.end()) {
    reserved_ -= d->second;
    dedicated_.erase(d);
    CUDA_CHECK(cudaFree(p));
    return;
  }
  FreeBlock b{static_cast<char*>(p), stream, {}};
  // Released without a stream: any added stream's queued work may use it (the null stream itself when none
  // were added).
  const std::vector<cudaStream_t> on = stream || streams_.empty() ? std::vector<cudaStream_t>{stream} : streams_;
  for (cudaStream_t s : on) {
    b.done.push_back(spare_event());
    CUDA_CHECK(cudaEventRecord(b.done.back(), s));
  }
  free_[size].push_back(std::move(b));
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
