// Device memory for the CUDA backend: a few large cudaMalloc chunks carved up by a bump pointer, with
// freed blocks kept on per-size free lists. A training run allocates the same sizes over and over (per-layer
// activations, workspaces), so exact-size reuse never fragments in practice and no cudaMalloc/cudaFree (both
// synchronise the device) happens after start-up. Requests larger than half a chunk get their own cudaMalloc.
// Free lists are stream-aware: a block released on one stream is reused at once on that stream (stream order
// keeps the new owner's work after the old one's) but by another stream only once an event recorded at the
// release says the work queued before it has finished. The null stream is no stream in particular: a block
// released without one may still be in use by work on any stream the arena knows (add_stream), so events on
// all of them must have passed; a block asked for without one is for any stream, so it must be idle
// everywhere.
#pragma once
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_common.h"

namespace cnn {
namespace CNN_CUDA_NS {

class DeviceArena {
 public:
  static constexpr size_t kAlign = 256;  // cudaMalloc's alignment; keeps float4 and cp.async-style loads legal

  explicit DeviceArena(size_t chunk_bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // A stream whose work may use blocks released without a stream. The owner's streams, added before they
  // are used; the arena does not own them.
  void add_stream(cudaStream_t stream);
  // Never returns null: running out of device memory ends the job with the sizes involved. The block is for
  // work on `stream` (null: on any stream, e.g. written by one and read by another).
  void* alloc(size_t bytes, cudaStream_t stream = nullptr);
  // p must come from alloc() of this arena (or be null); anything else ends the job. Work already queued on
  // `stream` (null: on any added stream) may still use it.
  void release(void* p, cudaStream_t stream = nullptr);

  size_t bytes_in_use() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }
  size_t reserved_bytes() const { return reserved_; }  // held from CUDA: chunks plus dedicated blocks
  int cuda_mallocs() const { return mallocs_; }

 private:
  struct FreeBlock {
    char* p;
    cudaStream_t stream;             // released on (null: on every added stream)
    std::vector<cudaEvent_t> done;   // recorded at the release on `stream`, or on each added stream
  };
  void* cuda_malloc(size_t bytes);
  char* reuse(size_t size, cudaStream_t stream);
  bool idle(const FreeBlock& b);
  cudaEvent_t spare_event();

  size_t chunk_bytes_;
  std::vector<void*> chunks_;
  char* bump_ = nullptr;  // next free byte of the newest chunk
  size_t bump_left_ = 0;
  std::unordered_map<size_t, std::vector<FreeBlock>> free_;  // rounded size -> released blocks
  std::vector<cudaEvent_t> spare_events_;
  std::vector<cudaStream_t> streams_;  // add_stream
  std::unordered_map<const void*, size_t> live_;          // block -> rounded size
  std::unordered_map<const void*, size_t> dedicated_;     // own cudaMalloc, freed on release
  size_t in_use_ = 0, peak_ = 0, reserved_ = 0;
  int mallocs_ = 0;
};

}  // namespace CNN_CUDA_NS
}  // namespace cnn
