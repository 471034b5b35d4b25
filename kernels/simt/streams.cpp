// Streams and events of the SIMT emulator. By default every stream operation runs when it is called, so
// streams and events order nothing and no ordering bug between streams can show. With deferred streams (a
// nonzero seed: simt::set_deferred_streams or CNNTRAIN_SIMT_DEFER) each stream queues its operations, and they
// run only at synchronisation points (stream/event/device synchronisation, blocking copies, cudaFree, or
// simt::progress_streams), in a random order drawn from the seed that respects the order within each stream
// and cudaStreamWaitEvent; until then cudaEventQuery and cudaStreamQuery answer cudaErrorNotReady. A missing
// cudaStreamWaitEvent, or a pinned buffer refilled while its copy is still queued, then gives wrong results
// for some seeds instead of never.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/simt/internal.h"

namespace simt {
namespace runtime {

struct CUevent_st {
  unsigned flags;
  uint64_t recorded = 0;   // cudaEventRecord calls so far
  uint64_t completed = 0;  // the latest of them its stream has reached
  bool timed = false;
  std::chrono::steady_clock::time_point when;
};

struct CUstream_st {
  struct Op {
    enum Kind { kWork, kRecord, kWait } kind = kWork;
    std::function<cudaError_t()> work;
    CUevent_st* event = nullptr;
    uint64_t record = 0;  // kRecord: which record completes; kWait: which one it waits for
  };
  unsigned flags = 0;
  std::deque<Op> queue;
};

}  // namespace runtime

namespace {

using Op = CUstream_st::Op;

uint64_t defer_seed_from_env() {
  const char* env = std::getenv("CNNTRAIN_SIMT_DEFER");
  return env ? std::strtoull(env, nullptr, 0) : 0;
}

std::atomic<uint64_t> g_defer_seed{defer_seed_from_env()};

// Guards the queues, events, the stream list, the random state and the pinned ranges: host threads other
// than the one that runs the queues (e.g. a watchdog polling cudaEventQuery) may look at them.
std::mutex g_mu;
CUstream_st g_null_stream;
std::vector<CUstream_st*> g_streams{&g_null_stream};
uint64_t g_rng = g_defer_seed.load();
std::map<uintptr_t, size_t> g_pinned;
thread_local int t_running_queued_work = 0;

uint64_t next_random() {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

CUstream_st* resolve(cudaStream_t s) { return s ? s : &g_null_stream; }

void complete_record(CUevent_st* e, uint64_t record) {
  e->completed = std::max(e->completed, record);
  e->when = std::chrono::steady_clock::now();
  e->timed = true;
}

cudaError_t bad_handle(const char* fn) {
  return detail::record_error(cudaErrorInvalidResourceHandle, detail::format("%s: null event", fn),
                              detail::ErrorKind::kApi);
}

// *out = a new stream or event with `flags`, for the Create calls (fn).
template <class Handle>
cudaError_t create_handle(const char* fn, Handle** out, unsigned flags) {
  if (cudaError_t e = detail::check_device_selected(fn)) return e;
  if (!out) {
    return detail::record_error(cudaErrorInvalidValue, detail::format("%s: null result pointer", fn),
                                detail::ErrorKind::kApi);
  }
  *out = new Handle;
  (*out)->flags = flags;
  return cudaSuccess;
}

// Runs queued operations, one at a time from a randomly chosen stream whose next operation may run, until
// done() holds (checked under g_mu). Work runs without the lock; kernels record their own faults for the
// next synchronising call.
template <class Done>
void run_queues_until(Done done) {
  ++t_running_queued_work;
  for (;;) {
    Op op;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      if (done()) break;
      std::vector<CUstream_st*> ready;
      for (CUstream_st* s : g_streams) {
        if (s->queue.empty()) continue;
        const Op& head = s->queue.front();
        if (head.kind != Op::kWait || head.event->completed >= head.record) ready.push_back(s);
      }
      if (ready.empty()) {
        // Every wait names a record issued before it, so the queues cannot wait on each other in a cycle.
        std::fprintf(stderr, "simt: deferred streams: nothing can run but the synchronisation is not reached\n");
        std::abort();
      }
      CUstream_st* s = ready[next_random() % ready.size()];
      op = std::move(s->queue.front());
      s->queue.pop_front();
      if (op.kind == Op::kRecord) complete_record(op.event, op.record);
      if (op.kind != Op::kWork) continue;
    }
    op.work();
  }
  --t_running_queued_work;
}

bool all_empty() {
  for (CUstream_st* s : g_streams)
    if (!s->queue.empty()) return false;
  return true;
}

}  // namespace

void set_deferred_streams(uint64_t seed) {
  detail::synchronize_all();
  std::lock_guard<std::mutex> lk(g_mu);
  g_defer_seed.store(seed);
  g_rng = seed;
}

uint64_t deferred_streams_seed() { return g_defer_seed.load(); }

cudaError_t enqueue_host_work(cudaStream_t stream, std::function<cudaError_t()> work) {
  return detail::submit_work(stream, std::move(work));
}

void progress_streams() {
  if (t_running_queued_work == 0) detail::synchronize_all();
}

namespace detail {

bool deferred_streams() { return g_defer_seed.load() != 0; }

cudaError_t submit_work(cudaStream_t stream, std::function<cudaError_t()> work) {
  if (!deferred_streams()) return work();
  std::lock_guard<std::mutex> lk(g_mu);
  Op op;
  op.work = std::move(work);
  resolve(stream)->queue.push_back(std::move(op));
  return cudaSuccess;
}

void synchronize_all() {
  if (deferred_streams()) run_queues_until(all_empty);
}

void synchronize_stream(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (deferred_streams()) run_queues_until([s] { return s->queue.empty(); });
}

void note_pinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
}

void forget_pinned(const void* p) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_pinned.erase(reinterpret_cast<uintptr_t>(p));
}

bool is_pinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lk(g_mu);
  return inside_one(g_pinned, p, bytes);
}

}  // namespace detail

namespace runtime {

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (cudaError_t e = create_handle("cudaStreamCreate", stream, flags)) return e;
  std::lock_guard<std::mutex> lk(g_mu);
  g_streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return cudaSuccess;
  detail::synchronize_stream(stream);  // CUDA lets queued work finish after the call
  {
    std::lock_guard<std::mutex> lk(g_mu);
    g_streams.erase(std::remove(g_streams.begin(), g_streams.end(), stream), g_streams.end());
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = detail::check_device_selected("cudaStreamSynchronize")) return e;
  detail::synchronize_stream(stream);
  return detail::take_pending_error();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = detail::check_device_selected("cudaStreamQuery")) return e;
  std::lock_guard<std::mutex> lk(g_mu);
  return resolve(stream)->queue.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (cudaError_t e = detail::check_device_selected("cudaStreamWaitEvent")) return e;
  if (!event) return bad_handle("cudaStreamWaitEvent");
  std::lock_guard<std::mutex> lk(g_mu);
  // Waits for the latest record issued so far, as CUDA does; nothing to wait for once it has completed.
  if (detail::deferred_streams() && event->completed < event->recorded) {
    Op op;
    op.kind = Op::kWait;
    op.event = event;
    op.record = event->recorded;
    resolve(stream)->queue.push_back(std::move(op));
  }
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  return create_handle("cudaEventCreate", event, flags);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return cudaSuccess;
  detail::synchronize_all();  // queued records and waits may still name it
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = detail::check_device_selected("cudaEventRecord")) return e;
  if (!event) return bad_handle("cudaEventRecord");
  std::lock_guard<std::mutex> lk(g_mu);
  const uint64_t record = ++event->recorded;
  if (!detail::deferred_streams()) {
    complete_record(event, record);
    return cudaSuccess;
  }
  Op op;
  op.kind = Op::kRecord;
  op.event = event;
  op.record = record;
  resolve(stream)->queue.push_back(std::move(op));
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t e = detail::check_device_selected("cudaEventSynchronize")) return e;
  if (!event) return bad_handle("cudaEventSynchronize");
  if (detail::deferred_streams()) {
    uint64_t target;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      target = event->recorded;
    }
    run_queues_until([event, target] { return event->completed >= target; });
  }
  return detail::take_pending_error();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t e = detail::check_device_selected("cudaEventQuery")) return e;
  if (!event) return bad_handle("cudaEventQuery");
  std::lock_guard<std::mutex> lk(g_mu);
  return event->completed >= event->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) {
    return detail::record_error(cudaErrorInvalidValue, "cudaEventElapsedTime: null argument",
                                detail::ErrorKind::kApi);
  }
  std::lock_guard<std::mutex> lk(g_mu);
  if (!start->timed || !end->timed || start->completed < start->recorded || end->completed < end->recorded ||
      ((start->flags | end->flags) & cudaEventDisableTiming)) {
    return detail::record_error(cudaErrorInvalidResourceHandle,
                                "cudaEventElapsedTime: event not recorded, not completed or without timing",
                                detail::ErrorKind::kApi);
  }
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = detail::check_device_selected("cudaDeviceSynchronize")) return e;
  detail::synchronize_all();
  return detail::take_pending_error();
}

}  // namespace runtime
}  // namespace simt
