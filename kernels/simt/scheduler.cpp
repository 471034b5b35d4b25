// Block scheduler of the SIMT emulator: runs the threads of one block as fibers, releases barriers, matches
// warp intrinsics lane by lane and turns every way a block can hang or diverge into an error that names the
// source line, instead of hanging or silently producing what one particular GPU would have produced.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <vector>

#include "kernels/simt/fiber.h"
#include "kernels/simt/internal.h"

namespace simt {
namespace {

uint64_t seed_from_env() {
  const char* env = std::getenv("CNN_SIMT_SEED");
  return env ? std::strtoull(env, nullptr, 0) : 0;
}

std::atomic<uint64_t> g_seed{seed_from_env()};
// Bumped by set_schedule_seed so every host thread restarts its launch count: a seed then reproduces the
// same schedules from the moment it is set.
std::atomic<uint64_t> g_seed_generation{0};

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void set_schedule_seed(uint64_t seed) {
  g_seed.store(seed);
  g_seed_generation.fetch_add(1);
}
uint64_t schedule_seed() { return g_seed.load(); }

namespace detail {
namespace {

enum class LaneState : uint8_t { kReady, kBarrier, kWarpWait, kExited };

// What a lane reads from a source lane that is not taking part: NaN as float or double, -1 as an integer.
constexpr uint64_t kPoison = ~uint64_t{0};

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

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kSyncwarp: return "__syncwarp";
    case WarpOp::kShfl: return "__shfl_sync";
    case WarpOp::kShflUp: return "__shfl_up_sync";
    case WarpOp::kShflDown: return "__shfl_down_sync";
    case WarpOp::kShflXor: return "__shfl_xor_sync";
    case WarpOp::kBallot: return "__ballot_sync";
    case WarpOp::kAny: return "__any_sync";
    case WarpOp::kAll: return "__all_sync";
    case WarpOp::kMatrix: return "wmma::*_sync";
  }
  return "?";
}

const char* barrier_name(BarrierKind kind) {
  switch (kind) {
    case BarrierKind::kSync: return "__syncthreads";
    case BarrierKind::kCount: return "__syncthreads_count";
    case BarrierKind::kAnd: return "__syncthreads_and";
    case BarrierKind::kOr: return "__syncthreads_or";
  }
  return "?";
}

std::string coords(const uint3& v) { return format("(%u,%u,%u)", v.x, v.y, v.z); }

bool same_site(const Lane& a, const Lane& b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

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
  [[noreturn]] void kernel_fault(cudaError_t code, std::string message) { fault_in_fiber(code, std::move(message)); }
  uint64_t switches() const { return switches_; }

 private:
  static void lane_main(void* self) {
    auto* e = static_cast<Engine*>(self);
    e->invoke_(e->pack_);
  }
  bool run_block(uint3 block_idx, uint64_t salt);
  void draw_order(uint64_t salt);
  void on_exit(Lane& lane);
  void resolve_stall();
  void finish_warp_op(unsigned base, unsigned mask);
  Lane& current(const char* file, int line, const char* what);
  void fault(cudaError_t code, std::string message);
  [[noreturn]] void fault_in_fiber(cudaError_t code, std::string message);
  std::string thread_name(const Lane& l) const { return coords(l.ctx.thread_idx); }

  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Lane> lanes_;
  std::vector<Warp> warps_;
  std::vector<unsigned> order_;
  unsigned nthreads_ = 0, live_ = 0, exited_ = 0;
  Lane* current_ = nullptr;
  uint64_t switches_ = 0;

  Invoker invoke_ = nullptr;
  const void* pack_ = nullptr;
  dim3 grid_, block_;
  uint64_t seed_ = 0, seed_generation_ = ~uint64_t{0}, launch_index_ = 0, phase_ = 0;

  // One arena per host thread: dynamic shared memory at offset 0, static arrays after it.
  struct FreeDeleter {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char[], FreeDeleter> smem_;
  size_t dyn_bytes_ = 0, smem_used_ = 0, static_bytes_ = 0, smem_limit_ = 0;
  std::vector<SharedSlot> slots_;

  bool failed_ = false;
  cudaError_t code_ = cudaSuccess;
  std::string message_;
};

Engine& engine() {
  static thread_local Engine e;
  return e;
}

void Engine::fault(cudaError_t code, std::string message) {
  if (failed_) return;
  failed_ = true;
  code_ = code;
  message_ = std::move(message);
}

void Engine::fault_in_fiber(cudaError_t code, std::string message) {
  fault(code, std::move(message));
  fibers_[current_->linear]->yield();
  std::fprintf(stderr, "simt: a faulted fiber was resumed\n");
  std::abort();
}

Lane& Engine::current(const char* file, int line, const char* what) {
  if (!current_) {
    std::fprintf(stderr, "simt: %s:%d: %s called outside a kernel\n", file, line, what);
    std::abort();
  }
  return *current_;
}

void Engine::draw_order(uint64_t salt) {
  order_.resize(nthreads_);
  for (unsigned i = 0; i < nthreads_; ++i) order_[i] = i;
  if (seed_ == 0) return;
  uint64_t state = seed_ ^ (salt * 0xD1B54A32D192ED03ull) ^ (phase_ * 0x8CB92BA72F3D8DD7ull);
  for (unsigned i = nthreads_; i > 1; --i) std::swap(order_[i - 1], order_[splitmix64(state) % i]);
}

cudaError_t Engine::check(const void* kernel, dim3 grid, dim3 block, size_t shmem, const LaunchSite& site) {
  const std::string at = format("%s:%d: launch of %s", site.file, site.line, site.kernel);
  if (current_) {
    return record_error(cudaErrorNotSupported, at + ": launching from inside a kernel is not supported",
                        ErrorKind::kLaunch);
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > kMaxThreadsPerBlock) {
    return record_error(cudaErrorInvalidConfiguration,
                        at + format(": block %s has %llu threads; each dimension must be >= 1 (z <= 64) and "
                                    "the block at most %u threads",
                                    coords(block).c_str(), static_cast<unsigned long long>(threads),
                                    kMaxThreadsPerBlock),
                        ErrorKind::kLaunch);
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFu || grid.y > 65535 || grid.z > 65535) {
    return record_error(cudaErrorInvalidConfiguration,
                        at + ": grid " + coords(grid) + " is empty or too large (x < 2^31, y and z <= 65535)",
                        ErrorKind::kLaunch);
  }
  const size_t dyn_limit = max_dynamic_shared(kernel);
  if (shmem > dyn_limit) {
    return record_error(cudaErrorInvalidValue,
                        at + format(": %zu bytes of dynamic shared memory exceed the %zu allowed (opt in with "
                                    "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                                    "bytes), at most %zu)",
                                    shmem, dyn_limit, kSharedOptinLimit),
                        ErrorKind::kLaunch);
  }
  return cudaSuccess;
}

cudaError_t Engine::run(const void* kernel, Invoker invoke, const void* pack, dim3 grid, dim3 block, size_t shmem,
                        const LaunchSite& site) {
  const std::string at = format("%s:%d: launch of %s", site.file, site.line, site.kernel);
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (seed_generation_ != g_seed_generation.load()) {
    seed_generation_ = g_seed_generation.load();
    launch_index_ = 0;
  }
  seed_ = g_seed.load();
  invoke_ = invoke;
  pack_ = pack;
  grid_ = grid;
  block_ = block;
  nthreads_ = static_cast<unsigned>(threads);
  while (fibers_.size() < nthreads_) fibers_.push_back(std::make_unique<Fiber>());
  if (lanes_.size() < nthreads_) lanes_.resize(nthreads_);
  if (!smem_) {
    smem_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, kSharedOptinLimit + 4096)));
    if (!smem_) {
      return record_error(cudaErrorMemoryAllocation, at + ": no memory for shared memory", ErrorKind::kLaunch);
    }
  }
  dyn_bytes_ = shmem;
  smem_limit_ = shared_opted_in(kernel) ? kSharedOptinLimit : kSharedDefaultLimit;
  failed_ = false;

  // Seeded runs visit the blocks in a random affine order i -> (a*i + c) mod n with a coprime to n, a
  // permutation that needs no table however large the grid.
  const uint64_t nblocks = uint64_t{grid.x} * grid.y * grid.z;
  uint64_t a = 1, c = 0;
  uint64_t rng = seed_ ^ (launch_index_ * 0xA24BAED4963EE407ull);
  if (seed_ != 0 && nblocks > 1) {
    c = splitmix64(rng) % nblocks;
    do a = splitmix64(rng) % nblocks; while (a == 0 || std::gcd(a, nblocks) != 1);
  }
  uint3 failed_block{0, 0, 0};
  for (uint64_t i = 0; i < nblocks && !failed_; ++i) {
    const uint64_t idx = static_cast<uint64_t>((static_cast<unsigned __int128>(a) * i + c) % nblocks);
    const uint3 b{static_cast<unsigned>(idx % grid.x), static_cast<unsigned>(idx / grid.x % grid.y),
                  static_cast<unsigned>(idx / (uint64_t{grid.x} * grid.y))};
    failed_block = b;
    run_block(b, launch_index_ * 0x9E3779B97F4A7C15ull + idx);
  }
  ++launch_index_;
  if (!failed_) return cudaSuccess;
  return record_error(code_,
                      message_ + format(" [kernel %s, block %s of grid %s, block size %s, launched at %s:%d]",
                                        site.kernel, coords(failed_block).c_str(), coords(grid).c_str(),
                                        coords(block).c_str(), site.file, site.line),
                      ErrorKind::kKernelFault);
}

bool Engine::run_block(uint3 block_idx, uint64_t salt) {
  for (unsigned i = 0; i < nthreads_; ++i) {
    Lane& l = lanes_[i];
    l.ctx = ThreadCtx{uint3{i % block_.x, i / block_.x % block_.y, i / (block_.x * block_.y)}, block_idx, block_,
                      grid_};
    l.linear = i;
    l.lane = i % kWarpSize;
    l.warp = i / kWarpSize;
    l.state = LaneState::kReady;
    fibers_[i]->reset(&Engine::lane_main, this);
  }
  warps_.assign((nthreads_ + kWarpSize - 1) / kWarpSize, Warp{});
  live_ = nthreads_;
  exited_ = 0;
  std::memset(smem_.get(), 0xFF, dyn_bytes_);
  smem_used_ = dyn_bytes_;
  static_bytes_ = 0;
  slots_.clear();
  phase_ = 0;
  draw_order(salt);
  for (;;) {
    bool ran = false;
    for (unsigned idx : order_) {
      Lane& l = lanes_[idx];
      if (l.state != LaneState::kReady) continue;
      ran = true;
      current_ = &l;
      t_ctx = &l.ctx;
      fibers_[idx]->resume();
      switches_ += 2;
      t_ctx = nullptr;
      current_ = nullptr;
      if (failed_) return false;
      if (fibers_[idx]->finished()) {
        on_exit(l);
        if (failed_) return false;
      }
    }
    if (ran) continue;
    if (live_ == 0) return true;
    ++phase_;
    resolve_stall();
    if (failed_) return false;
    draw_order(salt);
  }
}

void Engine::on_exit(Lane& l) {
  l.state = LaneState::kExited;
  --live_;
  ++exited_;
  Warp& w = warps_[l.warp];
  w.exited |= 1u << l.lane;
  for (unsigned k = 0; k < w.ngroups; ++k) {
    if (!(w.groups[k].mask >> l.lane & 1u)) continue;
    const Lane& o = lanes_[l.warp * kWarpSize + __builtin_ctz(w.groups[k].arrived)];
    return fault(cudaErrorLaunchFailure,
                 format("%s:%d: %s with mask 0x%08x in thread %s waits for lane %u (thread %s), which has exited",
                        o.file, o.line, op_name(o.op), o.mask, thread_name(o).c_str(), l.lane,
                        thread_name(l).c_str()));
  }
}

// Nothing is ready: either every live thread waits at a barrier (release it, or report divergence) or some
// wait for lanes that can never arrive (deadlock).
void Engine::resolve_stall() {
  const Lane* first_barrier = nullptr;
  const Lane* first_warp = nullptr;
  const Lane* first_exited = nullptr;
  for (unsigned i = 0; i < nthreads_; ++i) {
    const Lane& l = lanes_[i];
    if (l.state == LaneState::kBarrier && !first_barrier) first_barrier = &l;
    if (l.state == LaneState::kWarpWait && !first_warp) first_warp = &l;
    if (l.state == LaneState::kExited && !first_exited) first_exited = &l;
  }
  if (!first_warp) {
    const Lane& b = *first_barrier;
    if (first_exited) {
      return fault(cudaErrorLaunchFailure,
                   format("%s:%d: %s in thread %s waits for thread %s, which has exited without reaching it",
                          b.file, b.line, barrier_name(b.barrier), thread_name(b).c_str(),
                          thread_name(*first_exited).c_str()));
    }
    int count = 0;
    for (unsigned i = 0; i < nthreads_; ++i) {
      const Lane& l = lanes_[i];
      if (!same_site(l, b) || l.barrier != b.barrier) {
        return fault(cudaErrorLaunchFailure,
                     format("%s:%d: divergent barrier: thread %s waits at %s here while thread %s waits at %s "
                            "(%s:%d)",
                            b.file, b.line, thread_name(b).c_str(), barrier_name(b.barrier),
                            thread_name(l).c_str(), barrier_name(l.barrier), l.file, l.line));
      }
      count += l.value != 0;
    }
    const int live = static_cast<int>(nthreads_);
    const int result = b.barrier == BarrierKind::kCount ? count
                       : b.barrier == BarrierKind::kAnd ? count == live
                       : b.barrier == BarrierKind::kOr  ? count > 0
                                                        : 0;
    for (unsigned i = 0; i < nthreads_; ++i) {
      lanes_[i].result = static_cast<uint64_t>(result);
      lanes_[i].state = LaneState::kReady;
    }
    return;
  }
  const Lane& w = *first_warp;
  const unsigned base = w.warp * kWarpSize;
  for (unsigned m = w.mask; m; m &= m - 1) {
    const Lane& o = lanes_[base + __builtin_ctz(m)];
    if (o.state == LaneState::kWarpWait && o.mask == w.mask) continue;
    std::string doing = o.state == LaneState::kBarrier
                            ? format("waits at %s (%s:%d)", barrier_name(o.barrier), o.file, o.line)
                        : o.state == LaneState::kWarpWait
                            ? format("waits at %s (%s:%d) with mask 0x%08x", op_name(o.op), o.file, o.line, o.mask)
                            : std::string("has exited");
    return fault(cudaErrorLaunchFailure,
                 format("%s:%d: deadlock: %s with mask 0x%08x in thread %s never completes: lane %u (thread %s) %s",
                        w.file, w.line, op_name(w.op), w.mask, thread_name(w).c_str(), o.lane,
                        thread_name(o).c_str(), doing.c_str()));
  }
  fault(cudaErrorLaunchFailure, format("%s:%d: deadlock in %s", w.file, w.line, op_name(w.op)));
}

int Engine::block_barrier(BarrierKind kind, int pred, const char* file, int line) {
  Lane& me = current(file, line, barrier_name(kind));
  me.barrier = kind;
  me.value = pred != 0;
  me.file = file;
  me.line = line;
  me.state = LaneState::kBarrier;
  fibers_[me.linear]->yield();
  return static_cast<int>(me.result);
}

uint64_t Engine::warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file,
                         int line) {
  Lane& me = current(file, line, op_name(op));
  const unsigned bit = 1u << me.lane;
  const unsigned base = me.warp * kWarpSize;
  const unsigned nlanes = std::min(kWarpSize, nthreads_ - base);
  const unsigned existing = nlanes == 32 ? ~0u : (1u << nlanes) - 1;
  if (!(mask & bit)) {
    fault_in_fiber(cudaErrorLaunchFailure,
                   format("%s:%d: bad mask: %s with mask 0x%08x called by lane %u (thread %s), which the mask "
                          "does not include",
                          file, line, op_name(op), mask, me.lane, thread_name(me).c_str()));
  }
  if (mask & ~existing) {
    fault_in_fiber(cudaErrorLaunchFailure,
                   format("%s:%d: bad mask: %s with mask 0x%08x names lanes this warp does not have (it has %u)",
                          file, line, op_name(op), mask, nlanes));
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    fault_in_fiber(cudaErrorLaunchFailure,
                   format("%s:%d: %s width %d is not a power of two in [1, 32]", file, line, op_name(op), width));
  }
  Warp& w = warps_[me.warp];
  if (const unsigned gone = mask & w.exited) {
    const Lane& o = lanes_[base + __builtin_ctz(gone)];
    fault_in_fiber(cudaErrorLaunchFailure,
                   format("%s:%d: bad mask: %s with mask 0x%08x in thread %s names lane %u (thread %s), which "
                          "has exited",
                          file, line, op_name(op), mask, thread_name(me).c_str(), o.lane, thread_name(o).c_str()));
  }
  unsigned g = w.ngroups;
  for (unsigned k = 0; k < w.ngroups; ++k) {
    const WarpGroup& c = w.groups[k];
    if (c.mask == mask) {
      g = k;
      continue;
    }
    // Lanes waiting with another mask that names us can only complete once we arrive there: a deadlock.
    // Lanes of our mask waiting elsewhere are fine; they may reach this intrinsic afterwards.
    if (c.mask & bit) {
      const Lane& o = lanes_[base + __builtin_ctz(c.arrived)];
      fault_in_fiber(cudaErrorLaunchFailure,
                     format("%s:%d: bad mask: %s with mask 0x%08x in lane %u (thread %s) meets mask 0x%08x of "
                            "%s in lane %u (%s:%d); all lanes of a mask must pass the same mask",
                            file, line, op_name(op), mask, me.lane, thread_name(me).c_str(), c.mask, op_name(c.op),
                            o.lane, o.file, o.line));
    }
  }
  if (g == w.ngroups) {
    w.groups[w.ngroups++] = WarpGroup{mask, op, 0};
  } else if (w.groups[g].op != op) {
    const Lane& o = lanes_[base + __builtin_ctz(w.groups[g].arrived)];
    fault_in_fiber(cudaErrorLaunchFailure,
                   format("%s:%d: %s with mask 0x%08x in lane %u meets %s in lane %u (%s:%d); all lanes of a mask "
                          "must call the same warp intrinsic",
                          file, line, op_name(op), mask, me.lane, op_name(o.op), o.lane, o.file, o.line));
  }
  me.op = op;
  me.mask = mask;
  me.value = value;
  me.arg = arg;
  me.width = width;
  me.file = file;
  me.line = line;
  me.state = LaneState::kWarpWait;
  w.groups[g].arrived |= bit;
  if (w.groups[g].arrived == mask) {
    w.groups[g] = w.groups[--w.ngroups];
    finish_warp_op(base, mask);
  } else {
    fibers_[me.linear]->yield();
  }
  return me.result;
}

void Engine::finish_warp_op(unsigned base, unsigned mask) {
  unsigned ballot = 0;
  for (unsigned m = mask; m; m &= m - 1) {
    const unsigned j = __builtin_ctz(m);
    if (lanes_[base + j].value) ballot |= 1u << j;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    const unsigned j = __builtin_ctz(m);
    Lane& l = lanes_[base + j];
    const unsigned w = static_cast<unsigned>(l.width);
    const unsigned segment = j & ~(w - 1);
    unsigned src = j;
    switch (l.op) {
      case WarpOp::kShfl: src = segment + (static_cast<unsigned>(l.arg) & (w - 1)); break;
      case WarpOp::kShflUp: src = static_cast<unsigned>(l.arg) <= j - segment ? j - l.arg : j; break;
      case WarpOp::kShflDown: src = j + static_cast<unsigned>(l.arg) < segment + w ? j + l.arg : j; break;
      case WarpOp::kShflXor: src = (j ^ static_cast<unsigned>(l.arg)) < segment + w ? j ^ l.arg : j; break;
      default: break;
    }
    switch (l.op) {
      case WarpOp::kSyncwarp: l.result = 0; break;
      case WarpOp::kMatrix: l.result = lanes_[base + __builtin_ctz(mask)].value; break;  // lane 0's call site
      case WarpOp::kBallot: l.result = ballot; break;
      case WarpOp::kAny: l.result = ballot != 0; break;
      case WarpOp::kAll: l.result = ballot == mask; break;
      default: l.result = (mask >> src & 1u) ? lanes_[base + src].value : kPoison; break;
    }
    l.state = LaneState::kReady;
  }
}

void* Engine::shared_static(const void* key, size_t bytes, size_t align, const char* file, int line) {
  current(file, line, "CNN_SHARED");
  for (const SharedSlot& s : slots_) {
    if (s.key == key) return smem_.get() + s.offset;
  }
  const size_t a = std::max<size_t>(align, 16);
  const size_t offset = (smem_used_ + a - 1) / a * a;
  static_bytes_ += bytes;
  if (static_bytes_ > kSharedDefaultLimit) {
    fault_in_fiber(cudaErrorLaunchOutOfResources,
                   format("%s:%d: static shared memory of the block reaches %zu bytes, over the %zu allowed", file,
                          line, static_bytes_, kSharedDefaultLimit));
  }
  if (offset + bytes > smem_limit_) {
    fault_in_fiber(cudaErrorLaunchOutOfResources,
                   format("%s:%d: static (%zu) plus dynamic (%zu) shared memory exceed the %zu bytes this kernel "
                          "may use",
                          file, line, static_bytes_, dyn_bytes_, smem_limit_));
  }
  std::memset(smem_.get() + offset, 0xFF, bytes);
  slots_.push_back(SharedSlot{key, offset});
  smem_used_ = offset + bytes;
  return smem_.get() + offset;
}

void* Engine::dynamic_shared(const char* file, int line) {
  current(file, line, "CNN_DYNAMIC_SHARED");
  return smem_.get();
}

}  // namespace

int block_barrier(BarrierKind kind, int pred, const char* file, int line) {
  return engine().block_barrier(kind, pred, file, line);
}
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line) {
  return engine().warp_op(op, mask, value, arg, width, file, line);
}
void* shared_static(const void* key, size_t bytes, size_t align, const char* file, int line) {
  return engine().shared_static(key, bytes, align, file, line);
}
void* dynamic_shared(const char* file, int line) { return engine().dynamic_shared(file, line); }
void kernel_fault(cudaError_t code, std::string message) { engine().kernel_fault(code, std::move(message)); }

cudaError_t launch(const void* kernel, Invoker invoke, std::shared_ptr<const void> pack, dim3 grid, dim3 block,
                   size_t shmem, cudaStream_t stream, const LaunchSite& site) {
  if (cudaError_t e = engine().check(kernel, grid, block, shmem, site)) return e;
  return submit_work(stream, [=] { return engine().run(kernel, invoke, pack.get(), grid, block, shmem, site); });
}

}  // namespace detail

uint64_t fiber_switches() { return detail::engine().switches(); }

}  // namespace simt
