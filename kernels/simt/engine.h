// The SIMT emulator's engine, shared by the block scheduler (scheduler.cpp) and the primitives fibers call
// (intrinsics.cpp); not for kernel or backend code. One engine per host thread runs one launch at a time:
// its blocks, one after another or several resident at once with their threads interleaved.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/simt/fiber.h"
#include "kernels/simt/internal.h"

namespace simt {
namespace detail {

enum class LaneState : uint8_t { kReady, kBarrier, kWarpWait, kExited };

struct Lane {
  ThreadCtx ctx;
  unsigned linear = 0, lane = 0, warp = 0;
  LaneState state = LaneState::kReady;
  // The primitive the lane waits at.
  const char* file = "";
  int line = 0;
  BarrierKind barrier = BarrierKind::kSync;
  WarpOp op = WarpOp::kSyncwarp;
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
};

// The lanes of one warp waiting at a warp intrinsic with the same mask. A waiting lane belongs to exactly
// one group, so a warp has at most 32 and usually one; arrivals look at groups, not at all 32 lanes.
struct WarpGroup {
  unsigned mask;
  WarpOp op;
  unsigned arrived;
};

struct Warp {
  unsigned exited = 0;
  unsigned ngroups = 0;
  WarpGroup groups[kWarpSize];
};

struct SharedSlot {
  const void* key;
  size_t offset;
};

// A block slot: the fibers, lanes and shared memory of one running block, kept across launches (stacks are
// reused). The scheduler runs a block in rounds: each round resumes every ready fiber once, in `order`; a
// round in which nothing could run ends at a barrier (released, or reported) or at the block's end.
struct Block {
  struct FreeDeleter {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<Lane> lanes;
  std::vector<Warp> warps;
  std::vector<unsigned> order;
  uint3 idx{0, 0, 0};
  uint64_t salt = 0, phase = 0;
  unsigned live = 0, exited = 0;
  unsigned pos = 0;    // next place in `order` of the current round
  uint64_t priority = 0;  // place in the interleaved blocks' queue: the highest runs first
  uint64_t wake = 0;      // asleep until the scheduler's turn count reaches this
  bool ran = false;  // some fiber ran in the current round
  // Dynamic shared memory at offset 0, static arrays after it.
  std::unique_ptr<unsigned char[], FreeDeleter> smem;
  size_t smem_used = 0, static_bytes = 0;
  std::vector<SharedSlot> slots;
};

class Engine {
 public:
  // Configuration errors (returned by CNN_LAUNCH at once), then running a checked launch.
  cudaError_t check(const void* kernel, dim3 grid, dim3 block, size_t shmem, const LaunchSite& site);
  cudaError_t run(const void* kernel, Invoker invoke, const void* pack, dim3 grid, dim3 block, size_t shmem,
                  const LaunchSite& site);
  int block_barrier(BarrierKind kind, int pred, const char* file, int line);
  uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line);
  void* shared_static(const void* key, size_t bytes, size_t align, const char* file, int line);
  void* dynamic_shared(const char* file, int line);
  // Ends the running fiber's turn; it stays ready (atomics and fences with interleaved blocks).
  void yield_turn();
  [[noreturn]] void kernel_fault(cudaError_t code, std::string message) { fault_in_fiber(code, std::move(message)); }
  uint64_t switches() const { return switches_; }
  // Identifies the running launch for per-launch choices (the wmma fragment mapping): a mix of the schedule
  // seed and the launch's index since the seed was set.
  uint64_t launch_key() const { return launch_key_; }

 private:
  static void lane_main(void* self) {
    auto* e = static_cast<Engine*>(self);
    e->invoke_(e->pack_);
  }
  cudaError_t prepare(const void* kernel, size_t shmem, unsigned resident, const std::string& at);
  void start_block(Block& b, uint64_t linear_idx);
  bool run_turns(Block& b, uint64_t turns);
  void schedule(uint64_t a, uint64_t c, uint64_t nblocks, unsigned resident);
  void draw_order(Block& b);
  void switch_point(Block& b, bool atomic);
  void on_exit(Block& b, Lane& lane);
  void resolve_stall(Block& b);
  void finish_warp_op(Block& b, unsigned base, unsigned mask);
  Lane& current(const char* file, int line, const char* what);
  void fault(cudaError_t code, std::string message);
  [[noreturn]] void fault_in_fiber(cudaError_t code, std::string message);

  std::vector<std::unique_ptr<Block>> blocks_;
  unsigned nthreads_ = 0;
  Block* block_ = nullptr;   // the block whose threads run
  Lane* current_ = nullptr;  // the lane whose fiber runs
  uint64_t switches_ = 0;

  Invoker invoke_ = nullptr;
  const void* pack_ = nullptr;
  dim3 grid_, block_dim_;
  uint64_t seed_ = 0, seed_generation_ = ~uint64_t{0}, launch_index_ = 0, launch_key_ = 0;
  // Interleaved blocks: random state, ends of the queue, turns so far (see switch_point).
  uint64_t rng_ = 0, front_ = 0, back_ = 0, turns_ = 0;
  size_t dyn_bytes_ = 0, smem_limit_ = 0;

  bool failed_ = false;
  cudaError_t code_ = cudaSuccess;
  std::string message_;
  uint3 failed_block_{0, 0, 0};
};

inline Engine& engine() {
  static thread_local Engine e;
  return e;
}

std::string coords(const uint3& v);
const char* op_name(WarpOp op);
const char* barrier_name(BarrierKind kind);
inline std::string thread_name(const Lane& l) { return coords(l.ctx.thread_idx); }

uint64_t splitmix64(uint64_t& state);

}  // namespace detail
}  // namespace simt
