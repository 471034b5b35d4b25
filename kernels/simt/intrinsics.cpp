// The primitives emulated CUDA threads call into the engine: block barriers, warp intrinsics (a rendezvous
// of the lanes of a mask, checked lane by lane), shared memory of the running block, and the turn a thread
// gives up at atomics when blocks interleave. The scheduling itself is in scheduler.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kernels/simt/engine.h"

namespace simt {
namespace detail {

namespace {

// What a lane reads from a source lane that is not taking part: NaN as float or double, -1 as an integer.
constexpr uint64_t kPoison = ~uint64_t{0};

}  // namespace

std::string coords(const uint3& v) { return format("(%u,%u,%u)", v.x, v.y, v.z); }

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

Lane& Engine::current(const char* file, int line, const char* what) {
  if (!current_) {
    std::fprintf(stderr, "simt: %s:%d: %s called outside a kernel\n", file, line, what);
    std::abort();
  }
  return *current_;
}

void Engine::fault_in_fiber(cudaError_t code, std::string message) {
  fault(code, std::move(message));
  block_->fibers[current_->linear]->yield();
  std::fprintf(stderr, "simt: a faulted fiber was resumed\n");
  std::abort();
}

void Engine::yield_turn() {
  Lane& me = current(__FILE__, __LINE__, "an atomic or fence");
  switch_point(*block_, true);
  block_->fibers[me.linear]->yield();
}

int Engine::block_barrier(BarrierKind kind, int pred, const char* file, int line) {
  Lane& me = current(file, line, barrier_name(kind));
  me.barrier = kind;
  me.value = pred != 0;
  me.file = file;
  me.line = line;
  me.state = LaneState::kBarrier;
  block_->fibers[me.linear]->yield();
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
  Warp& w = block_->warps[me.warp];
  if (const unsigned gone = mask & w.exited) {
    const Lane& o = block_->lanes[base + __builtin_ctz(gone)];
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
      const Lane& o = block_->lanes[base + __builtin_ctz(c.arrived)];
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
    const Lane& o = block_->lanes[base + __builtin_ctz(w.groups[g].arrived)];
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
    finish_warp_op(*block_, base, mask);
  } else {
    block_->fibers[me.linear]->yield();
  }
  return me.result;
}

void Engine::finish_warp_op(Block& b, unsigned base, unsigned mask) {
  unsigned ballot = 0;
  for (unsigned m = mask; m; m &= m - 1) {
    const unsigned j = __builtin_ctz(m);
    if (b.lanes[base + j].value) ballot |= 1u << j;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    const unsigned j = __builtin_ctz(m);
    Lane& l = b.lanes[base + j];
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
      case WarpOp::kMatrix: l.result = b.lanes[base + __builtin_ctz(mask)].value; break;  // lane 0's call site
      case WarpOp::kBallot: l.result = ballot; break;
      case WarpOp::kAny: l.result = ballot != 0; break;
      case WarpOp::kAll: l.result = ballot == mask; break;
      default: l.result = (mask >> src & 1u) ? b.lanes[base + src].value : kPoison; break;
    }
    l.state = LaneState::kReady;
  }
}

void* Engine::shared_static(const void* key, size_t bytes, size_t align, const char* file, int line) {
  current(file, line, "CNN_SHARED");
  Block& b = *block_;
  for (const SharedSlot& s : b.slots) {
    if (s.key == key) return b.smem.get() + s.offset;
  }
  const size_t a = std::max<size_t>(align, 16);
  const size_t offset = (b.smem_used + a - 1) / a * a;
  b.static_bytes += bytes;
  if (b.static_bytes > kSharedDefaultLimit) {
    fault_in_fiber(cudaErrorLaunchOutOfResources,
                   format("%s:%d: static shared memory of the block reaches %zu bytes, over the %zu allowed", file,
                          line, b.static_bytes, kSharedDefaultLimit));
  }
  if (offset + bytes > smem_limit_) {
    fault_in_fiber(cudaErrorLaunchOutOfResources,
                   format("%s:%d: static (%zu) plus dynamic (%zu) shared memory exceed the %zu bytes this kernel "
                          "may use",
                          file, line, b.static_bytes, dyn_bytes_, smem_limit_));
  }
  std::memset(b.smem.get() + offset, 0xFF, bytes);
  b.slots.push_back(SharedSlot{key, offset});
  b.smem_used = offset + bytes;
  return b.smem.get() + offset;
}

void* Engine::dynamic_shared(const char* file, int line) {
  current(file, line, "CNN_DYNAMIC_SHARED");
  return block_->smem.get();
}

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
void yield_turn() { engine().yield_turn(); }

}  // namespace detail

uint64_t fiber_switches() { return detail::engine().switches(); }

}  // namespace simt
