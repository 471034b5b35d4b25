// Collectives (kernels/collectives.h) on the CUDA backend's device memory through NCCL. Compiled twice like
// every .cu: nvcc against <nccl.h> (cnn::gpu, --device cuda) and g++ against the emulated NCCL (cnn::emu,
// --device emu), so CI runs this very code: the MPI bootstrap, the communication stream, the events, the
// buckets and the watchdog probes.
//
// Ordering. Every collective runs on one communication stream (so all ranks see the same order), after an
// event recorded on the compute stream; the compute stream waits for the communication stream's latest event
// only where it needs a result (a synchronised batch norm's sums at once, the gradient buckets before the
// optimizer step). The host never waits for the device here.
// Watchdog. Each collective is bracketed by two events on the communication stream: the first completing
// means this rank's device arrived at it, the second that it finished. A probe on the watchdog thread polls
// them and ncclCommGetAsyncError; the abort hook is ncclCommAbort (the communicator is non-blocking, so it
// can be aborted from another thread). The probe's thread selects this rank's device before its CUDA calls:
// otherwise they go to device 0 (a context there for every rank of the node, and errors in exclusive-process
// mode). The main thread checks for the watchdog's abort before every NCCL call: an aborted communicator is
// freed, and naming it again is a use after free.
// Shutdown. Non-blocking communicators end by ncclCommFinalize, polled to ncclSuccess under the collective
// deadline, then ncclCommDestroy (whose implicit finalize would block without one); an error or the deadline
// aborts the communicator instead, and an aborted one is never destroyed.
#include <sched.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "src/comm/nccl_compat.h"
#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/comm/grad_sync.h"
#include "src/comm/watchdog.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

const char* nccl_result_name(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclUnknownResult";
  }
}

std::string nccl_error_text(ncclResult_t rc, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return strprintf("%s (%s)%s%s", nccl_result_name(rc), ncclGetErrorString(rc),
                   last && *last ? "; last NCCL error: " : "", last ? last : "");
}

// The one error path of NCCL calls: rank and host (through fatal), the call, NCCL's strings. After the
// watchdog has aborted the communicator, calls fail as a consequence: the watchdog's report stands.
[[noreturn]] void nccl_failed(const char* expr, ncclResult_t rc, ncclComm_t comm, const char* file, int line) {
  abort_if_watchdog_fired();
  fatal(kExitFailure, strprintf("NCCL call failed: %s at %s:%d: %s (run with NCCL_DEBUG=INFO for NCCL's own log)",
                                expr, file, line, nccl_error_text(rc, comm).c_str()));
}

#define NCCL_CHECK(comm, expr)                                                        \
  do {                                                                                \
    const ncclResult_t cnn_nccl_rc_ = (expr);                                         \
    if (cnn_nccl_rc_ != ncclSuccess && cnn_nccl_rc_ != ncclInProgress)                \
      ::cnn::CNN_CUDA_NS::nccl_failed(#expr, cnn_nccl_rc_, comm, __FILE__, __LINE__); \
  } while (0)

std::string with_step(const std::string& what) {
  const int64_t step = collective_step();
  return step >= 0 ? strprintf("%s at step %lld", what.c_str(), (long long)step) : what;
}

class NcclCollectives;

// With a 16-bit wire (--comm.grad_dtype), each bucket is rounded into a 16-bit staging buffer on the compute
// stream when it is launched (so the communication stream's wait on the compute stream covers it), summed as
// ncclBfloat16/ncclHalf, and widened back into the fp32 gradient on the compute stream after it has joined
// the communication stream.
class NcclGradSync final : public BucketedGradSync {
 public:
  NcclGradSync(NcclCollectives* owner, Backend& be, float* grads, size_t n, const GradSyncOptions& o);
  ~NcclGradSync() override;

 protected:
  void launch(size_t, float* data, size_t n, const std::string& what) override;
  double complete() override;

 private:
  NcclCollectives* nccl_;
  Backend& be_;
  DType wire_ = DType::kF32;  // kF32: no staging
  void* stage_ = nullptr;     // size() 16-bit elements of device memory
};

class NcclCollectives final : public Collectives {
 public:
  explicit NcclCollectives(Backend& be) : be_(be), ctx_(device_context(be)) {
    CUDA_CHECK(cudaGetDevice(&device_));  // the one the backend bound on this (the main) thread
    CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    // Rank 0 makes the id, MPI carries it to everyone; the communicator is non-blocking so that the
    // watchdog can abort it from its thread.
    ncclUniqueId id;
    if (world_rank() == 0) NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
    broadcast(&id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const uint64_t seq = begin_host_collective(Channel::kNccl, "NCCL communicator creation", true);
    const double t0 = watchdog_now();
    const ncclResult_t rc = ncclCommInitRankConfig(&comm_, world_size(), id, world_rank(), &config);
    if (rc != ncclSuccess && rc != ncclInProgress)
      nccl_failed("ncclCommInitRankConfig(&comm_, world_size(), id, world_rank(), &config)", rc, comm_, __FILE__,
                  __LINE__);
    wait_ready("ncclCommInitRankConfig", seq, t0);
    end_host_collective(Channel::kNccl, seq);
    probe_id_ = add_watchdog_probe([this] { probe(); });
    hook_id_ = add_abort_hook([this] {
      aborted_ = true;
      ncclCommAbort(comm_);
    });
  }

  ~NcclCollectives() override {
    remove_watchdog_callback(probe_id_);
    remove_watchdog_callback(hook_id_);
    // After an abort the communicator is gone; once the watchdog fired the job is being aborted anyway.
    if (!aborted_ && !watchdog_fired()) shut_down();
    for (const Tracked& t : inflight_) {
      cudaEventDestroy(t.start);
      cudaEventDestroy(t.end);
    }
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    cudaEventDestroy(compute_ready_);
    cudaEventDestroy(comm_done_);
    cudaStreamDestroy(comm_stream_);
  }

  std::string describe() const override {
    int v = 0;
    ncclGetVersion(&v);
    return strprintf("%s %d.%d.%d on the device (a communication stream ordered by events; communicator of %d "
                     "ranks bootstrapped through MPI)",
                     CNN_SIMT_EMULATED ? "emulated NCCL (over MPI, SIMT emulator streams), API" : "NCCL",
                     v / 10000, v / 100 % 100, v % 100, world_size());
  }

  int ranks() const override { return world_size(); }
  void allreduce_sum(float* data, size_t n, const std::string& what) override {
    issue(data, n, ncclFloat32, what);
    join();
  }
  void allreduce_sum(double* data, size_t n, const std::string& what) override {
    issue(data, n, ncclFloat64, what);
    join();
  }
  // Host numbers go through MPI, the communicator's bootstrap channel, not through the device.
  void allreduce_sum_host(double* data, size_t n, const std::string& what) override {
    host_->allreduce_sum_host(data, n, what);
  }
  std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) override {
    return std::make_unique<NcclGradSync>(this, be_, grads, n, o);
  }

  // In-place sum on the communication stream, after the compute stream's work issued so far.
  void issue(void* data, size_t n, ncclDataType_t type, const std::string& what) {
    abort_if_watchdog_fired();  // the communicator may be aborted already: do not touch it
    CUDA_CHECK(retire_finished());
    CUDA_CHECK(cudaEventRecord(compute_ready_, ctx_.compute));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, compute_ready_, 0));
    Tracked t;
    t.seq = begin_device_collective(with_step(what));
    t.start = take_event();
    t.end = take_event();
    CUDA_CHECK(cudaEventRecord(t.start, comm_stream_));
    {
      std::lock_guard<std::mutex> lk(mu_);
      inflight_.push_back(t);
    }
    const double t0 = watchdog_now();
    const ncclResult_t rc = ncclAllReduce(data, data, n, type, ncclSum, comm_, comm_stream_);
    if (rc != ncclSuccess && rc != ncclInProgress)
      nccl_failed("ncclAllReduce(data, data, n, type, ncclSum, comm_, comm_stream_)", rc, comm_, __FILE__, __LINE__);
    if (rc == ncclInProgress) wait_ready("ncclAllReduce", 0, t0);
    CUDA_CHECK(cudaEventRecord(t.end, comm_stream_));
    std::lock_guard<std::mutex> lk(mu_);
    inflight_.back().end_recorded = true;
  }

  // The compute stream waits for every collective issued so far.
  void join() {
    CUDA_CHECK(cudaEventRecord(comm_done_, comm_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(ctx_.compute, comm_done_, 0));
  }

 private:
  struct Tracked {
    uint64_t seq = 0;
    cudaEvent_t start = nullptr, end = nullptr;
    bool end_recorded = false, arrived = false;
  };

  cudaEvent_t take_event() {
    std::lock_guard<std::mutex> lk(mu_);
    if (!spare_.empty()) {
      cudaEvent_t e = spare_.back();
      spare_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  // Under mu_: moves finished collectives out of inflight_, telling the watchdog. Both the watchdog thread
  // (probe) and the main thread (before each issue, so that no watchdog is needed to recycle events) call it.
  // Returns the first error of an event query (a device fault is sticky: it would never complete).
  cudaError_t poll_locked() {
    for (Tracked& t : inflight_) {
      if (t.arrived) continue;
      const cudaError_t q = cudaEventQuery(t.start);
      if (q == cudaErrorNotReady) break;  // in stream order: later ones have not arrived either
      if (q != cudaSuccess) return q;
      t.arrived = true;
      device_collective_arrived(t.seq);
    }
    while (!inflight_.empty() && inflight_.front().arrived && inflight_.front().end_recorded) {
      const cudaError_t q = cudaEventQuery(inflight_.front().end);
      if (q == cudaErrorNotReady) break;
      if (q != cudaSuccess) return q;
      device_collective_completed(inflight_.front().seq);
      spare_.push_back(inflight_.front().start);
      spare_.push_back(inflight_.front().end);
      inflight_.pop_front();
    }
    return cudaSuccess;
  }
  cudaError_t retire_finished() {
    std::lock_guard<std::mutex> lk(mu_);
    return poll_locked();
  }

  // Watchdog thread: no MPI here (ncclCommGetAsyncError of the emulation makes MPI calls only on the thread
  // that created the communicator).
  void probe() {
    if (aborted_) return;
    cudaError_t e = cudaSetDevice(device_);
    if (e == cudaSuccess) e = retire_finished();
    if (e != cudaSuccess) {
      report_async_collective_error(strprintf("CUDA error on the watchdog thread (device %d): %s: %s", device_,
                                              cudaGetErrorName(e), cudaGetErrorString(e)));
      return;
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc == ncclSuccess && (state == ncclSuccess || state == ncclInProgress)) return;
    const ncclResult_t err = rc != ncclSuccess ? rc : state;
    report_async_collective_error("NCCL reported an asynchronous error on this rank: " + nccl_error_text(err, comm_));
  }

  // A non-blocking communicator returned ncclInProgress: poll its state, under the collective deadline when
  // `seq` names a host-tracked collective (creation).
  void wait_ready(const char* what, uint64_t seq, double t0) {
    for (;;) {
      // Before the query: the watchdog raises its flag before its hook aborts (and frees) the communicator.
      abort_if_watchdog_fired();
      ncclResult_t state = ncclSuccess;
      NCCL_CHECK(comm_, ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) nccl_failed(what, state, comm_, __FILE__, __LINE__);
      if (seq) check_collective_deadline(Channel::kNccl, seq, t0);
      sched_yield();
    }
  }

  // Main thread, the watchdog's hook removed: finalize, poll, destroy; abort on an error or past the deadline.
  // Problems are reported, not fatal: this runs on the way out, also while an exception unwinds.
  void shut_down() {
    const double t0 = watchdog_now();
    ncclResult_t state = ncclCommFinalize(comm_);
    while (state == ncclInProgress && watchdog_now() - t0 <= collective_timeout()) {
      sched_yield();
      const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
      if (rc != ncclSuccess) state = rc;
    }
    if (state != ncclSuccess) {
      const std::string why = state == ncclInProgress
                                  ? strprintf("still in progress after --comm.timeout_s %.0f s", collective_timeout())
                                  : nccl_error_text(state, comm_);
      ncclCommAbort(comm_);
      report_error("NCCL communicator shutdown: ncclCommFinalize " + why +
                   "; aborted it instead (run with NCCL_DEBUG=INFO for NCCL's own log)");
      return;
    }
    const ncclResult_t rc = ncclCommDestroy(comm_);  // the communicator is gone even when this fails
    if (rc != ncclSuccess)
      report_error("NCCL communicator shutdown: ncclCommDestroy: " + nccl_error_text(rc, nullptr));
  }

  Backend& be_;
  DeviceContext ctx_;
  std::unique_ptr<Collectives> host_ = make_mpi_collectives();
  int device_ = 0;  // this rank's, selected by every thread before it calls CUDA
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr, comm_done_ = nullptr;
  std::mutex mu_;  // inflight_ and spare_: the watchdog's probe polls them from its thread
  std::deque<Tracked> inflight_;
  std::vector<cudaEvent_t> spare_;
  int probe_id_ = 0, hook_id_ = 0;
  std::atomic<bool> aborted_{false};
};

NcclGradSync::NcclGradSync(NcclCollectives* owner, Backend& be, float* grads, size_t n, const GradSyncOptions& o)
    : BucketedGradSync(owner, grads, n, o), nccl_(owner), be_(be) {
  if (o.wire == GradWire::kF32 || world_size() == 1 || n == 0) return;  // one rank: nothing travels
  wire_ = o.wire == GradWire::kBF16 ? DType::kBF16 : DType::kF16;
  stage_ = be_.alloc(n * dtype_size(wire_));
}

NcclGradSync::~NcclGradSync() {
  if (stage_) be_.release(stage_);
}

void NcclGradSync::launch(size_t, float* data, size_t n, const std::string& what) {
  if (wire_ == DType::kF32) return nccl_->issue(data, n, ncclFloat32, what);
  void* s = static_cast<char*>(stage_) + static_cast<size_t>(data - grads()) * dtype_size(wire_);
  be_.convert(n, DType::kF32, data, wire_, s);
  nccl_->issue(s, n, wire_ == DType::kBF16 ? ncclBfloat16 : ncclFloat16, what);
}

double NcclGradSync::complete() {
  nccl_->join();
  if (wire_ != DType::kF32) be_.convert(size(), wire_, stage_, DType::kF32, grads());
  return 0;  // the host does not wait: the optimizer's kernels wait on the device
}

}  // namespace
}  // namespace CNN_CUDA_NS

#if CNN_SIMT_EMULATED
std::unique_ptr<Collectives> make_emu_collectives(Backend& be) { return std::make_unique<emu::NcclCollectives>(be); }
#else
std::unique_ptr<Collectives> make_cuda_collectives(Backend& be) { return std::make_unique<gpu::NcclCollectives>(be); }
#endif

}  // namespace cnn

#if !CNN_SIMT_EMULATED
extern "C" cnn::Collectives* cnntrain_cuda_make_collectives(cnn::Backend* be, std::string* error, int* error_code) {
  try {
    return cnn::make_cuda_collectives(*be).release();
  } catch (const cnn::Error& e) {
    *error = e.what();
    *error_code = e.code();
  }
  return nullptr;
}
#endif
