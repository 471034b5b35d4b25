// Block scheduler of the SIMT emulator: runs the blocks of a launch, one after another or several resident
// at once with their threads interleaved, each thread as a fiber; releases barriers and turns every way a
// block can hang or diverge into an error that names the source line, instead of hanging or silently
// producing what one particular GPU would have produced. The primitives the fibers call (barriers, warp
// intrinsics, shared memory) are in intrinsics.cpp.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "kernels/simt/engine.h"

namespace simt {
namespace {

uint64_t env_u64(const char* name) {
  const char* env = std::getenv(name);
  return env ? std::strtoull(env, nullptr, 0) : 0;
}

// A multiprocessor of sm_80/sm_90 holds at most 32 blocks.
constexpr int kMaxResident = 32;
int clamp_resident(uint64_t n) { return static_cast<int>(std::clamp<uint64_t>(n, 1, kMaxResident)); }

std::atomic<uint64_t> g_seed{env_u64("CNNTRAIN_SIMT_SEED")};
// Bumped by set_schedule_seed so every host thread restarts its launch count: a seed then reproduces the
// same schedules from the moment it is set.
std::atomic<uint64_t> g_seed_generation{0};
std::atomic<int> g_resident{clamp_resident(env_u64("CNNTRAIN_SIMT_RESIDENT_BLOCKS"))};

}  // namespace

void set_schedule_seed(uint64_t seed) {
  g_seed.store(seed);
  g_seed_generation.fetch_add(1);
}
uint64_t schedule_seed() { return g_seed.load(); }

void set_resident_blocks(int n) { g_resident.store(clamp_resident(n < 1 ? 1 : static_cast<uint64_t>(n))); }
int resident_blocks() { return g_resident.load(); }

namespace detail {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

bool same_site(const Lane& a, const Lane& b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

}  // namespace

void Engine::fault(cudaError_t code, std::string message) {
  if (failed_) return;
  failed_ = true;
  code_ = code;
  message_ = std::move(message);
  if (block_) failed_block_ = block_->idx;
}

void Engine::draw_order(Block& b) {
  b.order.resize(nthreads_);
  for (unsigned i = 0; i < nthreads_; ++i) b.order[i] = i;
  if (seed_ == 0) return;
  uint64_t state = seed_ ^ (b.salt * 0xD1B54A32D192ED03ull) ^ (b.phase * 0x8CB92BA72F3D8DD7ull);
  for (unsigned i = nthreads_; i > 1; --i) std::swap(b.order[i - 1], b.order[splitmix64(state) % i]);
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
  if (seed_generation_ != g_seed_generation.load()) {
    seed_generation_ = g_seed_generation.load();
    launch_index_ = 0;
  }
  seed_ = g_seed.load();
  launch_key_ = seed_ ^ ((launch_index_ + 1) * 0xD6E8FEB86659FD93ull);
  t_wmma_map = nullptr;
  invoke_ = invoke;
  pack_ = pack;
  grid_ = grid;
  block_dim_ = block;
  nthreads_ = static_cast<unsigned>(uint64_t{block.x} * block.y * block.z);
  const uint64_t nblocks = uint64_t{grid.x} * grid.y * grid.z;
  const int resident_setting = g_resident.load();
  const unsigned resident = static_cast<unsigned>(std::min<uint64_t>(resident_setting, nblocks));
  if (cudaError_t e = prepare(kernel, shmem, resident, at)) return e;

  // Seeded runs start the blocks in a random affine order i -> (a*i + c) mod n with a coprime to n, a
  // permutation that needs no table however large the grid.
  uint64_t a = 1, c = 0;
  rng_ = seed_ ^ (launch_index_ * 0xA24BAED4963EE407ull);
  front_ = back_ = uint64_t{1} << 63;
  turns_ = 0;
  if (seed_ != 0 && nblocks > 1) {
    c = splitmix64(rng_) % nblocks;
    do a = splitmix64(rng_) % nblocks; while (a == 0 || std::gcd(a, nblocks) != 1);
  }
  t_switch_at_atomics = resident_setting > 1;
  schedule(a, c, nblocks, resident);
  t_switch_at_atomics = false;
  block_ = nullptr;
  ++launch_index_;
  if (!failed_) return cudaSuccess;
  return record_error(code_,
                      message_ + format(" [kernel %s, block %s of grid %s, block size %s, launched at %s:%d]",
                                        site.kernel, coords(failed_block_).c_str(), coords(grid).c_str(),
                                        coords(block).c_str(), site.file, site.line),
                      ErrorKind::kKernelFault);
}

// Slots for `resident` blocks of the launch: fibers, lanes and shared memory, reused across launches.
cudaError_t Engine::prepare(const void* kernel, size_t shmem, unsigned resident, const std::string& at) {
  while (blocks_.size() < resident) blocks_.push_back(std::make_unique<Block>());
  for (unsigned s = 0; s < resident; ++s) {
    Block& b = *blocks_[s];
    while (b.fibers.size() < nthreads_) b.fibers.push_back(std::make_unique<Fiber>());
    if (b.lanes.size() < nthreads_) b.lanes.resize(nthreads_);
    if (!b.smem) {
      b.smem.reset(static_cast<unsigned char*>(std::aligned_alloc(64, kSharedOptinLimit + 4096)));
      if (!b.smem) {
        return record_error(cudaErrorMemoryAllocation, at + ": no memory for shared memory", ErrorKind::kLaunch);
      }
    }
  }
  dyn_bytes_ = shmem;
  smem_limit_ = shared_opted_in(kernel) ? kSharedOptinLimit : kSharedDefaultLimit;
  failed_ = false;
  return cudaSuccess;
}

// Interleaved blocks take turns in the order of a queue: the first awake block in it runs its next thread.
// A block joins at the front when it starts and goes to the back at each of its switch points: when it
// leaves a barrier, and when one of its threads passes an atomic or fence. There, with a nonzero seed, it
// also falls asleep half the time, for 2^k turns with k drawn from 0..16: a block paused right after
// announcing something (an atomic ticket) then often stays paused while the others run to their end, which
// is what exposes orderings between blocks that hold only by luck. (Sleeping at barriers as well would keep
// most blocks asleep, and the order of waking would matter more than the pauses.) When every block sleeps,
// the first to wake runs.
void Engine::switch_point(Block& b, bool atomic) {
  b.priority = --back_;
  if (atomic && seed_ != 0 && splitmix64(rng_) % 2 == 0) b.wake = turns_ + (uint64_t{1} << (splitmix64(rng_) % 17));
}

// Runs the blocks in the order i -> (a*i + c) mod nblocks, `resident` at a time; a finished block's slot
// takes the next one. With several resident, they take turns (see switch_point).
void Engine::schedule(uint64_t a, uint64_t c, uint64_t nblocks, unsigned resident) {
  uint64_t next = 0;
  const auto start_next = [&](Block& b) {
    b.priority = ++front_;
    b.wake = 0;
    start_block(b, static_cast<uint64_t>((static_cast<unsigned __int128>(a) * next++ + c) % nblocks));
  };
  if (resident == 1) {
    Block& b = *blocks_[0];
    for (;;) {
      start_next(b);
      run_turns(b, ~uint64_t{0});
      if (failed_ || next == nblocks) return;
    }
  }
  std::vector<Block*> active;
  for (unsigned s = 0; s < resident; ++s) {
    active.push_back(blocks_[s].get());
    start_next(*active.back());
  }
  const auto before = [&](const Block* x, const Block* y) {
    const bool x_awake = x->wake <= turns_, y_awake = y->wake <= turns_;
    if (x_awake != y_awake) return x_awake;
    return x_awake ? x->priority > y->priority : x->wake < y->wake;
  };
  for (; !active.empty(); ++turns_) {
    size_t k = 0;
    for (size_t i = 1; i < active.size(); ++i)
      if (before(active[i], active[k])) k = i;
    if (run_turns(*active[k], 1)) continue;
    if (failed_) return;
    if (next < nblocks) {
      start_next(*active[k]);
    } else {
      active[k] = active.back();
      active.pop_back();
    }
  }
}

void Engine::start_block(Block& b, uint64_t linear_idx) {
  b.idx = uint3{static_cast<unsigned>(linear_idx % grid_.x), static_cast<unsigned>(linear_idx / grid_.x % grid_.y),
                static_cast<unsigned>(linear_idx / (uint64_t{grid_.x} * grid_.y))};
  b.salt = launch_index_ * 0x9E3779B97F4A7C15ull + linear_idx;
  for (unsigned i = 0; i < nthreads_; ++i) {
    Lane& l = b.lanes[i];
    l.ctx = ThreadCtx{uint3{i % block_dim_.x, i / block_dim_.x % block_dim_.y, i / (block_dim_.x * block_dim_.y)},
                      b.idx, block_dim_, grid_};
    l.linear = i;
    l.lane = i % kWarpSize;
    l.warp = i / kWarpSize;
    l.state = LaneState::kReady;
    b.fibers[i]->reset(&Engine::lane_main, this);
  }
  b.warps.assign((nthreads_ + kWarpSize - 1) / kWarpSize, Warp{});
  b.live = nthreads_;
  b.exited = 0;
  std::memset(b.smem.get(), 0xFF, dyn_bytes_);
  b.smem_used = dyn_bytes_;
  b.static_bytes = 0;
  b.slots.clear();
  b.phase = 0;
  b.pos = 0;
  b.ran = false;
  draw_order(b);
}

// Resumes the block's next `turns` ready fibers, round after round. A round in which nothing ran means every
// live thread waits: release the barrier (or report the hang) and start the next round in a fresh order.
// False once the block has finished, or a fault has stopped the launch.
bool Engine::run_turns(Block& b, uint64_t turns) {
  block_ = &b;
  for (;;) {
    while (b.pos < nthreads_) {
      const unsigned i = b.order[b.pos++];
      Lane& l = b.lanes[i];
      if (l.state != LaneState::kReady) continue;
      b.ran = true;
      current_ = &l;
      t_ctx = &l.ctx;
      b.fibers[i]->resume();
      switches_ += 2;
      t_ctx = nullptr;
      current_ = nullptr;
      if (failed_) return false;
      if (b.fibers[i]->finished()) {
        on_exit(b, l);
        if (failed_) return false;
      }
      if (--turns == 0) return true;
    }
    b.pos = 0;
    if (b.ran) {
      b.ran = false;
      continue;
    }
    if (b.live == 0) return false;
    ++b.phase;
    resolve_stall(b);
    if (failed_) return false;
    draw_order(b);
    switch_point(b, false);
  }
}

void Engine::on_exit(Block& b, Lane& l) {
  l.state = LaneState::kExited;
  --b.live;
  ++b.exited;
  Warp& w = b.warps[l.warp];
  w.exited |= 1u << l.lane;
  for (unsigned k = 0; k < w.ngroups; ++k) {
    if (!(w.groups[k].mask >> l.lane & 1u)) continue;
    const Lane& o = b.lanes[l.warp * kWarpSize + __builtin_ctz(w.groups[k].arrived)];
    return fault(cudaErrorLaunchFailure,
                 format("%s:%d: %s with mask 0x%08x in thread %s waits for lane %u (thread %s), which has exited",
                        o.file, o.line, op_name(o.op), o.mask, thread_name(o).c_str(), l.lane,
                        thread_name(l).c_str()));
  }
}

// Nothing is ready: either every live thread waits at a barrier (release it, or report divergence) or some
// wait for lanes that can never arrive (deadlock).
void Engine::resolve_stall(Block& blk) {
  const Lane* first_barrier = nullptr;
  const Lane* first_warp = nullptr;
  const Lane* first_exited = nullptr;
  for (unsigned i = 0; i < nthreads_; ++i) {
    const Lane& l = blk.lanes[i];
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
      const Lane& l = blk.lanes[i];
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
      blk.lanes[i].result = static_cast<uint64_t>(result);
      blk.lanes[i].state = LaneState::kReady;
    }
    return;
  }
  const Lane& w = *first_warp;
  const unsigned base = w.warp * kWarpSize;
  for (unsigned m = w.mask; m; m &= m - 1) {
    const Lane& o = blk.lanes[base + __builtin_ctz(m)];
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

cudaError_t launch(const void* kernel, Invoker invoke, std::shared_ptr<const void> pack, dim3 grid, dim3 block,
                   size_t shmem, cudaStream_t stream, const LaunchSite& site) {
  if (cudaError_t e = engine().check(kernel, grid, block, shmem, site)) return e;
  return submit_work(stream, [=] { return engine().run(kernel, invoke, pack.get(), grid, block, shmem, site); });
}

}  // namespace detail
}  // namespace simt
