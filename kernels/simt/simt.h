// SIMT emulator: runs CUDA kernels written in the portable subset (see README.md) on the CPU, each CUDA
// thread of a block as a fiber. Kernel files include kernels/simt/cuda_compat.h, never this header.
// Blocks of a grid run one after another on the launching host thread (or a few at once, interleaved: see
// set_resident_blocks); the fibers switch only at __syncthreads*, __syncwarp and the *_sync warp intrinsics
// (and, interleaved, after atomics and fences), which is where the emulator checks that every thread of the
// block (or every lane named in the mask) arrives at the same primitive.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/simt/cuda_runtime_emu.h"
#include "kernels/simt/simt_half.h"
#include "kernels/simt/simt_math.h"

namespace simt {

// Seeded schedule: 0 (the default, unless CNNTRAIN_SIMT_SEED is set) runs the ready threads of a block in index
// order; any other seed draws a fresh random order of the threads after every barrier, and a random order
// of the blocks of each grid, so code that relies on an ordering CUDA does not promise gives different
// results under different seeds. Deterministic for a given seed and sequence of launches.
void set_schedule_seed(uint64_t seed);
uint64_t schedule_seed();

// Resident blocks: 1 (the default, unless CNNTRAIN_SIMT_RESIDENT_BLOCKS is set) runs the blocks of a grid one
// after another; n > 1 (at most 32) keeps up to n blocks resident at once, as on a GPU, and
// interleaves their threads: blocks take turns at barriers, atomics and fences, and with a nonzero schedule
// seed a block often pauses after an atomic while the others run on (see scheduler.cpp), so races between
// blocks (a non-atomic update of one element, a block reading another's output, a counter claimed before the
// data it announces is written) give wrong results. Process-wide, for launches started after the call; n < 1
// restores 1.
void set_resident_blocks(int n);
int resident_blocks();

// wmma fragment scrambling: off (the default, unless CNNTRAIN_SIMT_WMMA_SCRAMBLE=1) gives fragments the fixed
// element mapping of simt_wmma.h; on, each launch draws its own permutation of which lane holds which
// element (from the schedule seed and the launch's index), consistent within the launch, so load, mma and
// store still compose and kernels that index fragment elements by an assumed mapping give wrong results.
void set_wmma_scramble(bool on);
bool wmma_scramble();

// Deferred streams: 0 (the default, unless CNNTRAIN_SIMT_DEFER is set) runs every stream operation when it is
// called; any other seed queues each stream's operations and runs them at synchronisation points in an order
// drawn from the seed that respects stream order and events (see streams.cpp). Setting it synchronises first.
void set_deferred_streams(uint64_t seed);
uint64_t deferred_streams_seed();
// Host work ordered on `stream` like a kernel (runs at once when streams are not deferred); its error, if
// any, is the caller's to record. The emulated NCCL's collectives are such work.
cudaError_t enqueue_host_work(cudaStream_t stream, std::function<cudaError_t()> work);
// Runs all queued work, as a GPU progresses while its host waits elsewhere (a no-op without deferred
// streams, or when called from inside queued work).
void progress_streams();

// The full text of the most recent error (launch configuration, kernel fault, bad runtime call), with
// the source line of the primitive involved and of the launch; empty when there was none. Not cleared by
// cudaGetLastError.
std::string last_error_message();
// Errors are also printed to stderr unless this is set (or CNNTRAIN_SIMT_QUIET=1); tests that plant bugs set it.
void set_quiet(bool quiet);

// Multiprocessors the emulated device reports (cudaGetDeviceProperties, cudaDevAttrMultiProcessorCount):
// 4 by default, or CNNTRAIN_SIMT_SM_COUNT at start-up. Code that sizes grids from the count (grid-stride loops,
// split-K) then launches the shapes a real GPU gets, e.g. 132 for an H100 SXM. n < 1 restores the default.
void set_multiprocessor_count(int n);
int multiprocessor_count();

// How fibers switch: the hand-written x86-64 switch, or ucontext as a fallback. Process-wide, for blocks
// started after the call; CNNTRAIN_SIMT_CONTEXT=ucontext selects the fallback at start-up.
enum class ContextKind { kAsm, kUcontext };
void set_context_kind(ContextKind kind);
ContextKind context_kind();

// Bytes currently allocated with cudaMalloc (leak checks in tests).
size_t device_bytes_in_use();
// Context switches into and out of fibers so far on this host thread (benchmarks).
uint64_t fiber_switches();

// Emulated device limits, chosen so that code valid here is valid on both sm_80 and sm_90.
constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kSharedDefaultLimit = 48 * 1024;
constexpr size_t kSharedOptinLimit = 166912;  // sharedMemPerBlockOptin of an A100 (sm_80)

namespace detail {

struct ThreadCtx {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
// The CUDA thread the current fiber emulates; null outside kernels.
inline thread_local const ThreadCtx* t_ctx = nullptr;

enum class BarrierKind { kSync, kCount, kAnd, kOr };
// kMatrix: the rendezvous every nvcuda::wmma call starts with (simt_wmma.h).
enum class WarpOp { kSyncwarp, kShfl, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll, kMatrix };

int block_barrier(BarrierKind kind, int pred, const char* file, int line);
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line);
void* shared_static(const void* key, size_t bytes, size_t align, const char* file, int line);
void* dynamic_shared(const char* file, int line);
// Stops the running block with a kernel fault (reported like the emulator's own checks); for checks made by
// emulated CUDA APIs such as wmma's alignment rules. The message is taken by value and moved on: the faulting
// fiber never returns, so a string left in its frames would never be freed.
[[noreturn]] void kernel_fault(cudaError_t code, std::string message);

// Fragment element mapping of the running launch (simt_wmma.h), as row-major tile indices t = r * 16 + c.
// matrix_a/matrix_b fragments hold the whole tile in every lane: tile element t is x[a_slot[l][t]] in lane l
// (b_slot for matrix_b). Accumulators hold 8 elements a lane: x[i] of lane l is tile element acc[32 i + l].
// `scrambled` is false for the fixed mapping (identity slots, acc[s] = s), whose loops the wmma functions
// keep simple enough to vectorise.
struct WmmaMap {
  bool scrambled;
  uint8_t a_slot[kWarpSize][256], b_slot[kWarpSize][256];
  uint8_t acc[256];
};
// The running launch's mapping, drawn by its first wmma call (null until then).
inline thread_local const WmmaMap* t_wmma_map = nullptr;
const WmmaMap& draw_wmma_map();
inline const WmmaMap& wmma_map() { return t_wmma_map ? *t_wmma_map : draw_wmma_map(); }

template <typename T>
uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};
using Invoker = void (*)(const void* pack);
// Checks the configuration (its errors are returned now), then runs the kernel or, with deferred streams,
// queues it holding on to `pack`.
cudaError_t launch(const void* kernel, Invoker invoke, std::shared_ptr<const void> pack, dim3 grid, dim3 block,
                   size_t shmem, cudaStream_t stream, const LaunchSite& site);

}  // namespace detail

// Runs kernel<<<grid, block, shmem, stream>>>(args...) to completion (or queues it, with deferred streams).
// Each emulated thread calls the kernel with its own copy of the converted arguments, as CUDA passes
// parameters by value.
template <typename... P, typename... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                   const detail::LaunchSite& site, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "wrong number of kernel arguments");
  struct Pack {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> args;
  };
  auto pack = std::make_shared<const Pack>(Pack{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)});
  detail::Invoker invoke = [](const void* p) {
    const Pack* pk = static_cast<const Pack*>(p);
    std::apply(pk->kernel, pk->args);
  };
  return detail::launch(reinterpret_cast<const void*>(kernel), invoke, std::move(pack), grid, block, shmem, stream,
                        site);
}

}  // namespace simt

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// Plain __shared__ would be one variable for all blocks and could not be filled with NaN bytes per block.
#define __shared__ static_assert(false, "declare shared memory with CNN_SHARED / CNN_DYNAMIC_SHARED");

#define threadIdx (::simt::detail::t_ctx->thread_idx)
#define blockIdx (::simt::detail::t_ctx->block_idx)
#define blockDim (::simt::detail::t_ctx->block_dim)
#define gridDim (::simt::detail::t_ctx->grid_dim)
constexpr int warpSize = 32;

// Shared memory of the running block: storage is looked up by the address of a static local (one per
// declaration, and per instantiation of a template kernel), allocated on first use in the block, and
// filled with 0xFF bytes (NaN as float/double, -1 as integers). `dims` is the array part, e.g. [32][33],
// or empty for a scalar; a type with commas needs an alias.
#define CNN_SHARED(type, name, dims)                                                                   \
  static char cnn_shared_key_##name;                                                                   \
  using cnn_shared_type_##name = type dims;                                                            \
  cnn_shared_type_##name& name = *static_cast<cnn_shared_type_##name*>(::simt::detail::shared_static( \
      &cnn_shared_key_##name, sizeof(cnn_shared_type_##name), alignof(cnn_shared_type_##name), __FILE__, __LINE__))
#define CNN_DYNAMIC_SHARED(type, name) \
  type* name = static_cast<type*>(::simt::detail::dynamic_shared(__FILE__, __LINE__))

#define CNN_LAUNCH(kernel, grid, block, shmem, stream, ...)                                               \
  ::simt::launch(kernel, grid, block, shmem, stream, ::simt::detail::LaunchSite{#kernel, __FILE__, __LINE__}, \
                 ##__VA_ARGS__)

// Call sites are captured with __builtin_FILE/__builtin_LINE default arguments so that errors name the
// line of the primitive in the kernel source without wrapping each one in a macro.
#define CNN_SIMT_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()

inline void __syncthreads(CNN_SIMT_SITE) {
  ::simt::detail::block_barrier(::simt::detail::BarrierKind::kSync, 1, file, line);
}
inline int __syncthreads_count(int pred, CNN_SIMT_SITE) {
  return ::simt::detail::block_barrier(::simt::detail::BarrierKind::kCount, pred, file, line);
}
inline int __syncthreads_and(int pred, CNN_SIMT_SITE) {
  return ::simt::detail::block_barrier(::simt::detail::BarrierKind::kAnd, pred, file, line);
}
inline int __syncthreads_or(int pred, CNN_SIMT_SITE) {
  return ::simt::detail::block_barrier(::simt::detail::BarrierKind::kOr, pred, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, CNN_SIMT_SITE) {
  ::simt::detail::warp_op(::simt::detail::WarpOp::kSyncwarp, mask, 0, 0, warpSize, file, line);
}

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return from_bits<T>(warp_op(WarpOp::kShfl, mask, to_bits(var), src_lane, width, file, line));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return from_bits<T>(warp_op(WarpOp::kShflUp, mask, to_bits(var), static_cast<int>(delta), width, file, line));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return from_bits<T>(warp_op(WarpOp::kShflDown, mask, to_bits(var), static_cast<int>(delta), width, file, line));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return from_bits<T>(warp_op(WarpOp::kShflXor, mask, to_bits(var), lane_mask, width, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int pred, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return static_cast<unsigned>(warp_op(WarpOp::kBallot, mask, pred != 0, 0, warpSize, file, line));
}
inline int __any_sync(unsigned mask, int pred, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return static_cast<int>(warp_op(WarpOp::kAny, mask, pred != 0, 0, warpSize, file, line));
}
inline int __all_sync(unsigned mask, int pred, CNN_SIMT_SITE) {
  using namespace ::simt::detail;
  return static_cast<int>(warp_op(WarpOp::kAll, mask, pred != 0, 0, warpSize, file, line));
}

// nvcuda::wmma, built on the warp rendezvous above.
#include "kernels/simt/simt_wmma.h"
