// The emulated NCCL (see nccl_emu.h): communicators are duplicates of MPI_COMM_WORLD; a collective is host
// work on the emulator's stream that posts the matching non-blocking MPI collective and polls it, giving up
// when the communicator is aborted.
#include "src/comm/nccl_emu.h"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/simt/simt.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/mpi_wait.h"
#include "src/comm/nccl_emu_types.h"

namespace simt {
namespace nccl {

using namespace types;  // NOLINT(google-build-using-namespace): this file's own helpers

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, nranks = 1;
  bool blocking = true;
  uint64_t id_hash = 0;
  // ncclInProgress while being created, while a non-blocking call has not completed and while finalizing;
  // then ncclSuccess or the asynchronous error.
  std::atomic<int> state{ncclInProgress};
  std::atomic<bool> aborted{false};
  // The call that ended it (ncclCommAbort, ncclCommDestroy): from then on it is poisoned.
  std::atomic<const char*> ended_by{nullptr};
  std::thread::id owner;  // the thread that created it: the only one that may call MPI for it
  // A non-blocking collective that returned ncclInProgress: enqueued by the owner's polls_left-th poll.
  std::function<ncclResult_t()> pending;
  const char* pending_fn = nullptr;
  int polls_left = 0;
  std::mt19937_64 rng;  // when calls return ncclInProgress
  bool finalizing = false, finalized = false;
  std::atomic<int> queued{0};  // collectives enqueued on a stream that have not run yet
  // Creation: idup of MPI_COMM_WORLD (phase 0), then an allgather checking that every rank passed the same id
  // (1); 2: created.
  int init_phase = 0;
  MPI_Request init_req = MPI_REQUEST_NULL;
  std::vector<uint64_t> hashes;
  std::mutex mu;
  std::string last_error;
};

namespace {

std::mutex g_error_mu;
std::string g_last_error;  // of calls without a communicator

void set_error(ncclComm* comm, const std::string& msg) {
  std::lock_guard<std::mutex> lk(comm ? comm->mu : g_error_mu);
  (comm ? comm->last_error : g_last_error) = msg;
}

ncclResult_t fail(ncclComm* comm, ncclResult_t rc, const std::string& msg) {
  set_error(comm, msg);
  return rc;
}

std::mutex g_invalid_mu;
std::vector<std::string> g_invalid;

// A caller broke NCCL's rules: say so loudly (the caller may ignore the return code) and keep it for tests.
ncclResult_t invalid_use(ncclComm* comm, const char* fn, const std::string& what) {
  const std::string msg = std::string(fn) + ": " + what;
  std::fprintf(stderr, "nccl-emu: invalid use: %s\n", msg.c_str());
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> lk(g_invalid_mu);
    g_invalid.push_back(msg);
  }
  return fail(comm, ncclInvalidUsage, msg);
}

// Whether `comm` may be named by a call of `fn`: not null, neither aborted nor destroyed.
ncclResult_t check_live(ncclComm* comm, const char* fn) {
  if (!comm) return fail(nullptr, ncclInvalidArgument, std::string(fn) + ": null communicator");
  if (const char* by = comm->ended_by.load())
    return invalid_use(nullptr, fn, cnn::strprintf("the communicator was ended by %s (a use after free in NCCL)", by));
  return ncclSuccess;
}

// Aborted and destroyed communicators stay allocated and poisoned for the next kQuarantine endings, so a later
// call naming one is reported instead of reading freed memory; queued work may still look at them.
constexpr size_t kQuarantine = 64;
std::mutex g_dead_mu;
std::deque<ncclComm*> g_dead;

void end_comm(ncclComm* comm, const char* by) {
  comm->ended_by.store(by);
  std::lock_guard<std::mutex> lk(g_dead_mu);
  g_dead.push_back(comm);
  if (g_dead.size() > kQuarantine && g_dead.front()->queued.load() == 0) {
    delete g_dead.front();
    g_dead.pop_front();
  }
}

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return text;
}

// The asynchronous error a failed MPI call leaves on the communicator (collectives run as stream work).
void mpi_failed(ncclComm* comm, const char* call, int rc) {
  set_error(comm, cnn::strprintf("%s failed: %s", call, mpi_error_text(rc).c_str()));
  comm->state.store(ncclSystemError);
}

uint64_t hash_id(const ncclUniqueId& id) {
  uint64_t h = 1469598103934665603ull;
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// --- Fault injection (the CNNTRAIN_NCCL_EMU_FAULT test hook) ---

struct Fault {
  bool stall;
  int rank;
  long call;
};

std::vector<Fault> parse_faults() {
  std::vector<Fault> out;
  const char* env = std::getenv("CNNTRAIN_NCCL_EMU_FAULT");
  if (!env || !*env) return out;
  std::string spec(env);
  for (size_t a = 0; a <= spec.size();) {
    size_t b = spec.find(',', a);
    if (b == std::string::npos) b = spec.size();
    const std::string item = spec.substr(a, b - a);
    char kind[16] = {0};
    int rank = -1;
    long call = 0;
    if (std::sscanf(item.c_str(), "%15[a-z]:%d:%ld", kind, &rank, &call) != 3 ||
        (std::strcmp(kind, "stall") != 0 && std::strcmp(kind, "error") != 0) || rank < 0 || call < 1)
      cnn::fatal(cnn::kExitUsage, cnn::strprintf("CNNTRAIN_NCCL_EMU_FAULT: bad entry '%s'; expected stall:RANK:K or "
                                                 "error:RANK:K (K >= 1, the K-th collective call)", item.c_str()));
    out.push_back(Fault{std::strcmp(kind, "stall") == 0, rank, call});
    a = b + 1;
  }
  return out;
}

std::atomic<long> g_calls{0};

// Counts the call; true when it must not go ahead (the injected async error is then set on the comm).
bool inject_fault(ncclComm* comm, const char* fn) {
  static const std::vector<Fault> faults = parse_faults();
  const long call = ++g_calls;
  for (const Fault& f : faults) {
    if (f.rank != comm->rank || f.call != call) continue;
    std::fprintf(stderr, "nccl-emu: CNNTRAIN_NCCL_EMU_FAULT: rank %d %s at its collective call #%ld (%s)\n", comm->rank,
                 f.stall ? "stalls" : "reports an asynchronous error", call, fn);
    std::fflush(stderr);
    if (f.stall) {
      // A rank whose host or GPU hangs before the collective: only an abort or the job's end moves it.
      while (!comm->aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return true;
    }
    set_error(comm, cnn::strprintf("ncclRemoteError injected by CNNTRAIN_NCCL_EMU_FAULT=error:%d:%ld: collective call "
                                   "#%ld (%s) failed as if a peer had gone away", f.rank, f.call, call, fn));
    comm->state.store(ncclRemoteError);
    return true;
  }
  return false;
}

// --- Running collectives ---

// Polls `req` until it completes or the communicator is aborted (then the request is abandoned: the job is
// going down). Runs on the thread that drains the stream, which is the MPI main thread.
void wait(ncclComm* comm, MPI_Request* req, const char* fn) {
  for (long i = 0;; ++i) {
    int done = 0;
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_failed(comm, fn, rc);
    if (done) return;
    if (comm->aborted.load()) return;
    if (i > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (i > 200) sched_yield();
  }
}

bool usable(ncclComm* comm) { return !comm->aborted.load() && comm->state.load() == ncclSuccess; }

// Queues (or, inside a group, collects) the work of one collective.
thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<cudaStream_t, std::function<cudaError_t()>>> t_group;

ncclResult_t submit(ncclComm* comm, cudaStream_t stream, const std::function<void()>& body) {
  ++comm->queued;
  auto work = [comm, body]() -> cudaError_t {
    if (usable(comm)) body();  // an aborted or failed communicator's kernels do nothing, as NCCL's
    --comm->queued;
    return cudaSuccess;
  };
  if (t_group_depth > 0) {
    t_group.emplace_back(stream, std::move(work));
    return ncclSuccess;
  }
  if (enqueue_host_work(stream, std::move(work)) != cudaSuccess)
    return fail(comm, ncclUnhandledCudaError, "could not enqueue the collective on its stream");
  return ncclSuccess;
}

uint64_t in_progress_seed() {
  const char* env = std::getenv("CNNTRAIN_NCCL_EMU_SEED");
  return env && *env ? std::strtoull(env, nullptr, 10) : 1;
}

// A non-blocking communicator's collective returns ncclInProgress at seeded random calls (half of them) and
// is enqueued by the 1st to 3rd poll of ncclCommGetAsyncError, as NCCL may do with blocking = 0: so the
// callers' polling paths run, and one that records an event after an unfinished call orders nothing.
ncclResult_t start(ncclComm* comm, cudaStream_t stream, std::function<void()> body, const char* fn) {
  if (t_group_depth == 0 && !comm->blocking && in_progress_seed() != 0 && comm->rng() % 2 == 0) {
    comm->pending = [comm, stream, body = std::move(body)] { return submit(comm, stream, body); };
    comm->pending_fn = fn;
    comm->polls_left = 1 + static_cast<int>(comm->rng() % 3);
    comm->state.store(ncclInProgress);
    return ncclInProgress;
  }
  const ncclResult_t rc = submit(comm, stream, body);
  // With immediate streams the collective ran inside the call: an abort that ended it left it unfinished.
  return rc == ncclSuccess && comm->aborted.load() ? ncclInProgress : rc;
}

// The owner's poll of a non-blocking communicator: completes a pending collective or a finalize.
void progress_call(ncclComm* c) {
  if (std::this_thread::get_id() != c->owner || c->state.load() != ncclInProgress) return;
  if (c->pending && --c->polls_left <= 0) {
    auto call = std::move(c->pending);
    c->pending = nullptr;
    c->state.store(ncclSuccess);
    if (const ncclResult_t rc = call()) c->state.store(rc);
    if (c->aborted.load()) c->state.store(ncclInProgress);  // an abort ended it (immediate streams) unfinished
    return;
  }
  if (c->finalizing && !c->finalized) {
    simt::progress_streams();  // the collectives already enqueued finish first
    if (c->queued.load() == 0) {
      c->finalized = true;
      c->state.store(ncclSuccess);
    }
  }
}

// count: elements per rank; per_rank_slots: the buffers hold one such slot per rank (gather, scatter).
ncclResult_t check_call(ncclComm* comm, ncclDataType_t t, ncclRedOp_t op, size_t count, bool per_rank_slots,
                        const char* fn) {
  if (ncclResult_t rc = check_live(comm, fn)) return rc;
  if (comm->finalizing) return invalid_use(comm, fn, "the communicator is being finalized (ncclCommFinalize)");
  if (comm->pending)
    return invalid_use(comm, fn, cnn::strprintf("the previous call (%s) returned ncclInProgress and has not completed "
                                                "(poll ncclCommGetAsyncError until ncclSuccess first)",
                                                comm->pending_fn));
  if (comm->state.load() == ncclInProgress)
    return fail(comm, ncclInvalidUsage, std::string(fn) + ": the communicator is still being created (poll "
                                                          "ncclCommGetAsyncError until ncclSuccess)");
  if (type_size(t) == 0)
    return fail(comm, ncclInvalidArgument, cnn::strprintf("%s: data type %d is not emulated", fn, t));
  if (op < ncclSum || op > ncclAvg)
    return fail(comm, ncclInvalidArgument, cnn::strprintf("%s: bad reduction %d", fn, op));
  if (count * (per_rank_slots ? static_cast<size_t>(comm->nranks) : 1) > static_cast<size_t>(INT_MAX))
    return fail(comm, ncclInvalidArgument,
                cnn::strprintf("%s: %zu elements exceed the emulation's int counts", fn, count));
  return ncclSuccess;
}

// Creation: advance the state machine as far as MPI lets it without blocking.
void progress_init(ncclComm* c) {
  if (std::this_thread::get_id() != c->owner || c->init_phase == 2 || c->state.load() != ncclInProgress) return;
  int done = 0;
  int rc = MPI_Test(&c->init_req, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return mpi_failed(c, "MPI_Comm_idup", rc);
  if (!done) return;
  if (c->init_phase == 0) {
    c->init_phase = 1;
    c->hashes.assign(static_cast<size_t>(c->nranks), 0);
    rc = MPI_Iallgather(&c->id_hash, 1, MPI_UINT64_T, c->hashes.data(), 1, MPI_UINT64_T, c->mpi, &c->init_req);
    if (rc != MPI_SUCCESS) mpi_failed(c, "MPI_Iallgather", rc);
    return;
  }
  for (int r = 0; r < c->nranks; ++r)
    if (c->hashes[r] != c->id_hash) {
      set_error(c, cnn::strprintf("ncclCommInitRank: rank %d passed a different ncclUniqueId than rank %d (broadcast "
                                  "rank 0's id to every rank)", r, c->rank));
      c->state.store(ncclInvalidUsage);
      return;
    }
  c->init_phase = 2;
  c->state.store(ncclSuccess);
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(nullptr, ncclInvalidArgument, "ncclGetVersion: null pointer");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: null pointer");
  std::random_device rd;  // what makes ids unique is their randomness, as NCCL's
  for (size_t i = 0; i < NCCL_UNIQUE_ID_BYTES; i += 4) {
    const unsigned v = rd();
    std::memcpy(id->internal + i, &v, 4);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!out) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: null result pointer");
  int world = 1, me = 0, inited = 0;
  MPI_Initialized(&inited);
  if (!inited)
    return fail(nullptr, ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL needs MPI to be initialised");
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (nranks != world || rank != me)
    return fail(nullptr, ncclInvalidArgument,
                cnn::strprintf("ncclCommInitRank(nranks %d, rank %d): the emulated NCCL supports communicators of all "
                               "%d MPI ranks with NCCL rank = MPI rank (%d here)", nranks, rank, world, me));
  if (config && (config->size != sizeof(ncclConfig_t) || config->magic != 0xcafebeef))
    return fail(nullptr, ncclInvalidArgument, "ncclCommInitRankConfig: config not set from NCCL_CONFIG_INITIALIZER");
  const bool blocking = !config || config->blocking != 0;
  auto c = std::make_unique<ncclComm>();
  c->rank = rank;
  c->nranks = nranks;
  c->blocking = blocking;
  c->id_hash = hash_id(id);
  c->owner = std::this_thread::get_id();
  static std::atomic<uint64_t> serial{0};
  c->rng.seed(in_progress_seed() * 1000003 + static_cast<uint64_t>(rank) * 7919 + serial++);
  const int rc = MPI_Comm_idup(MPI_COMM_WORLD, &c->mpi, &c->init_req);
  if (rc != MPI_SUCCESS)
    return fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Comm_idup failed: " + mpi_error_text(rc));
  // While the host waits in MPI, queued device work (this communicator's collectives included) progresses.
  cnn::set_wait_progress_hook(simt::progress_streams);
  *out = c.release();
  if (!blocking) {
    progress_init(*out);
    return ncclInProgress;  // creation takes at least an idup and an allgather: never done yet
  }
  while ((*out)->state.load() == ncclInProgress && !(*out)->aborted.load()) {
    progress_init(*out);
    sched_yield();
  }
  return static_cast<ncclResult_t>((*out)->state.load());
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (ncclResult_t rc = check_live(comm, "ncclCommFinalize")) return rc;
  if (comm->finalizing) return invalid_use(comm, "ncclCommFinalize", "called twice");
  if (std::this_thread::get_id() != comm->owner)
    return fail(comm, ncclInvalidUsage, "ncclCommFinalize: the emulation finalizes on the thread that created the "
                                        "communicator (its MPI calls stay there)");
  if (comm->pending || comm->state.load() == ncclInProgress)
    return invalid_use(comm, "ncclCommFinalize", "a call is still in progress (poll ncclCommGetAsyncError first)");
  if (const int state = comm->state.load(); state != ncclSuccess) return static_cast<ncclResult_t>(state);
  comm->finalizing = true;
  comm->state.store(ncclInProgress);
  if (!comm->blocking) return ncclInProgress;
  while (!comm->finalized) progress_call(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (ncclResult_t rc = check_live(comm, "ncclCommDestroy")) return rc;
  ncclResult_t rc = ncclSuccess;
  if (!comm->blocking && !comm->finalized) {
    // It is destroyed all the same, as NCCL would; the caller learns of its mistake.
    rc = invalid_use(comm, "ncclCommDestroy", comm->finalizing
                         ? "ncclCommFinalize has not completed (poll ncclCommGetAsyncError until ncclSuccess first)"
                         : "a non-blocking communicator must be finalized first (ncclCommFinalize, then poll "
                           "ncclCommGetAsyncError until ncclSuccess; or ncclCommAbort it): the implicit finalize "
                           "blocks without a deadline");
  }
  simt::progress_streams();  // NCCL lets the collectives already enqueued finish
  if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  end_comm(comm, "ncclCommDestroy");
  return rc;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // From any thread, while another may be inside a collective of this communicator: that one gives up. The
  // MPI communicator is left behind; an abort precedes the end of the job.
  if (!comm) return ncclSuccess;
  if (ncclResult_t rc = check_live(comm, "ncclCommAbort")) return rc;
  comm->aborted.store(true);
  end_comm(comm, "ncclCommAbort");
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (ncclResult_t rc = check_live(comm, "ncclCommGetAsyncError")) return rc;
  if (!async_error) return fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  progress_init(comm);
  progress_call(comm);
  *async_error = static_cast<ncclResult_t>(comm->state.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t rc = check_live(comm, "ncclCommCount")) return rc;
  if (!count) return fail(comm, ncclInvalidArgument, "ncclCommCount: null argument");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t rc = check_live(comm, "ncclCommUserRank")) return rc;
  if (!rank) return fail(comm, ncclInvalidArgument, "ncclCommUserRank: null argument");
  *rank = comm->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  // The string lives until the next error of the same communicator, as NCCL's.
  static thread_local std::string copy;
  if (comm && check_live(comm, "ncclGetLastError") != ncclSuccess) comm = nullptr;  // names the invalid use
  std::lock_guard<std::mutex> lk(comm ? comm->mu : g_error_mu);
  copy = comm ? comm->last_error : g_last_error;
  return copy.c_str();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t rc = check_call(comm, datatype, op, count, false, "ncclAllReduce")) return rc;
  if (inject_fault(comm, "ncclAllReduce")) return comm->aborted.load() ? ncclInProgress : ncclSuccess;
  return start(comm, stream, [=] {
    MPI_Request req;
    const void* send = sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff;
    const int rc = MPI_Iallreduce(send, recvbuff, static_cast<int>(count), mpi_type(datatype), mpi_op(datatype, op),
                                  comm->mpi, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(comm, "MPI_Iallreduce", rc);
    wait(comm, &req, "MPI_Iallreduce");
    if (op == ncclAvg && usable(comm)) average(recvbuff, count, datatype, comm->nranks);
  }, "ncclAllReduce");
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t rc = check_call(comm, datatype, op, recvcount, true, "ncclReduceScatter")) return rc;
  if (inject_fault(comm, "ncclReduceScatter")) return comm->aborted.load() ? ncclInProgress : ncclSuccess;
  return start(comm, stream, [=] {
    // NCCL's in-place form keeps the result at this rank's slot of the send buffer, MPI's at its start: read
    // the input from a copy.
    const size_t bytes = recvcount * type_size(datatype) * comm->nranks;
    std::vector<char> input(static_cast<const char*>(sendbuff), static_cast<const char*>(sendbuff) + bytes);
    MPI_Request req;
    const int rc = MPI_Ireduce_scatter_block(input.data(), recvbuff, static_cast<int>(recvcount), mpi_type(datatype),
                                             mpi_op(datatype, op), comm->mpi, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(comm, "MPI_Ireduce_scatter_block", rc);
    wait(comm, &req, "MPI_Ireduce_scatter_block");
    if (op == ncclAvg && usable(comm)) average(recvbuff, recvcount, datatype, comm->nranks);
  }, "ncclReduceScatter");
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t rc = check_call(comm, datatype, ncclSum, sendcount, true, "ncclAllGather")) return rc;
  if (inject_fault(comm, "ncclAllGather")) return comm->aborted.load() ? ncclInProgress : ncclSuccess;
  return start(comm, stream, [=] {
    const size_t slot = sendcount * type_size(datatype) * comm->rank;
    const void* send = sendbuff == static_cast<const char*>(recvbuff) + slot ? MPI_IN_PLACE : sendbuff;
    MPI_Request req;
    const int rc = MPI_Iallgather(send, static_cast<int>(sendcount), mpi_type(datatype), recvbuff,
                                  static_cast<int>(sendcount), mpi_type(datatype), comm->mpi, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(comm, "MPI_Iallgather", rc);
    wait(comm, &req, "MPI_Iallgather");
  }, "ncclAllGather");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t rc = check_call(comm, datatype, ncclSum, count, false, "ncclBroadcast")) return rc;
  if (root < 0 || root >= comm->nranks)
    return fail(comm, ncclInvalidArgument, cnn::strprintf("ncclBroadcast: root %d of %d ranks", root, comm->nranks));
  if (inject_fault(comm, "ncclBroadcast")) return comm->aborted.load() ? ncclInProgress : ncclSuccess;
  return start(comm, stream, [=] {
    if (comm->rank == root && sendbuff != recvbuff) std::memmove(recvbuff, sendbuff, count * type_size(datatype));
    MPI_Request req;
    const int rc = MPI_Ibcast(recvbuff, static_cast<int>(count), mpi_type(datatype), root, comm->mpi, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(comm, "MPI_Ibcast", rc);
    wait(comm, &req, "MPI_Ibcast");
  }, "ncclBroadcast");
}

std::vector<std::string> emu_invalid_uses() {
  std::lock_guard<std::mutex> lk(g_invalid_mu);
  return g_invalid;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  auto ops = std::move(t_group);
  t_group.clear();
  for (auto& [stream, work] : ops)
    if (enqueue_host_work(stream, std::move(work)) != cudaSuccess)
      return fail(nullptr, ncclUnhandledCudaError, "ncclGroupEnd: could not enqueue a collective on its stream");
  return ncclSuccess;
}

}  // namespace nccl
}  // namespace simt
