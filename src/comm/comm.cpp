#include "src/comm/comm.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "src/base/error.h"
#include "src/comm/mpi_wait.h"
#include "src/comm/watchdog.h"

namespace cnn {

namespace {
bool g_init = false;
int g_rank = 0, g_size = 1, g_local_rank = 0, g_local_size = 1, g_nodes = 1;
size_t g_max_count = INT_MAX;
std::string g_host;
std::vector<int> g_node_ranks{0};
MPI_Comm g_node_comm = MPI_COMM_NULL;
void (*g_wait_progress)() = nullptr;

std::string count_of(size_t n, const char* type) { return strprintf("%zu %s%s", n, type, n == 1 ? "" : "s"); }
}  // namespace

PendingCollective begin_collective(const std::string& what) {
  const int64_t step = collective_step();
  const std::string name = step >= 0 ? strprintf("%s at step %lld", what.c_str(), (long long)step) : what;
  PendingCollective p;
  p.seq = begin_host_collective(Channel::kMpi, name, true);
  p.started = watchdog_now();
  return p;
}

void test_collectives(std::vector<PendingCollective>& pending) {
  for (size_t i = 0; i < pending.size();) {
    int done = 0;
    MPI_CHECK(MPI_Test(&pending[i].req, &done, MPI_STATUS_IGNORE));
    if (done) {
      end_host_collective(Channel::kMpi, pending[i].seq);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void wait_collectives(std::vector<PendingCollective>& pending) {
  // MPI_Test drives Open MPI's progress engine as its blocking calls would; after a short spin the loop
  // yields and then naps, so that a rank waiting for a slow peer leaves the cores to the compute threads.
  double last = watchdog_now();
  for (long i = 0; !pending.empty(); ++i) {
    test_collectives(pending);
    if (pending.empty()) break;
    if (g_wait_progress) g_wait_progress();
    if (i % 64 == 0) {
      // A gap between checks means this process did not run (SIGSTOP, a suspended VM) or was busy in the
      // progress hook: that time is not waiting for the other ranks.
      const double now = watchdog_now();
      if (now - last > kNotRunningGap)
        for (auto& p : pending) p.started += now - last;
      last = now;
      check_collective_deadline(Channel::kMpi, pending.front().seq, pending.front().started);
    }
    if (i > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (i > 200) sched_yield();
  }
}

void set_wait_progress_hook(void (*hook)()) { g_wait_progress = hook; }

[[noreturn]] void mpi_failed(const char* expr, const char* file, int line, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fatal(kExitFailure, strprintf("MPI call failed: %s at %s:%d: %s (check that all ranks run the same "
                                "binary and config, and that the network/fabric is healthy)",
                                expr, file, line, msg));
}

void comm_init(int* argc, char*** argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  g_init = true;
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  g_host.assign(name, len);
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &g_node_comm));
  MPI_CHECK(MPI_Comm_set_errhandler(g_node_comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(g_node_comm, &g_local_rank));
  MPI_CHECK(MPI_Comm_size(g_node_comm, &g_local_size));
  g_node_ranks.assign(static_cast<size_t>(g_local_size), 0);
  MPI_CHECK(MPI_Allgather(&g_rank, 1, MPI_INT, g_node_ranks.data(), 1, MPI_INT, g_node_comm));
  int leader = g_local_rank == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(&leader, &g_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  set_process_identity(g_rank, g_size, g_host);
  set_abort_handler(comm_abort);
}

void comm_finalize() {
  if (!g_init) return;
  stop_watchdog();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (g_node_comm != MPI_COMM_NULL) MPI_Comm_free(&g_node_comm);
    MPI_Finalize();
  }
  g_node_comm = MPI_COMM_NULL;
  g_init = false;
  clear_process_identity();
  set_abort_handler(nullptr);
}

bool comm_initialized() { return g_init; }

void comm_abort(int code) {
  std::fflush(nullptr);
  if (g_init && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  // A single process: skip MPI_Finalize (another thread may be inside the library) and leave at once.
  _exit(code);
}

int world_rank() { return g_rank; }
int world_size() { return g_size; }
int local_rank() { return g_local_rank; }
int local_size() { return g_local_size; }
int num_nodes() { return g_nodes; }
const std::vector<int>& node_ranks() { return g_node_ranks; }
const std::string& host_name() { return g_host; }

std::string topology_summary() {
  const int kLen = 64;
  std::vector<char> mine(kLen, 0), all(static_cast<size_t>(kLen) * g_size, 0);
  std::copy_n(g_host.begin(), std::min<size_t>(g_host.size(), kLen - 1), mine.begin());
  run_collective("MPI allgather of host names", [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD, r));
  });
  std::map<std::string, std::vector<int>> by_host;
  std::vector<std::string> order;
  for (int r = 0; r < g_size; ++r) {
    std::string h(&all[static_cast<size_t>(r) * kLen]);
    if (!by_host.count(h)) order.push_back(h);
    by_host[h].push_back(r);
  }
  std::string s = strprintf("topology: %d rank%s on %zu node%s (", g_size, g_size == 1 ? "" : "s",
                            order.size(), order.size() == 1 ? "" : "s");
  for (size_t i = 0; i < order.size() && i < 4; ++i) {
    const auto& r = by_host[order[i]];
    s += strprintf("%s%s: rank%s %d", i ? ", " : "", order[i].c_str(), r.size() == 1 ? "" : "s", r.front());
    if (r.size() > 1) s += strprintf("%s%d", r.back() - r.front() + 1 == static_cast<int>(r.size()) ? "-" : "..", r.back());
  }
  if (order.size() > 4) s += strprintf(", ... %zu more", order.size() - 4);
  s += ")";
  return s;
}

void barrier() {
  if (g_size == 1) return;
  run_collective("MPI barrier", [](MPI_Request* r) { MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, r)); });
}

size_t max_count_per_call() { return g_max_count; }
void set_max_count_per_call(size_t n) { g_max_count = n ? std::min<size_t>(n, INT_MAX) : INT_MAX; }

size_t mpi_piece_elems(size_t elem_bytes) { return std::min(g_max_count, (size_t{1} << 30) / elem_bytes); }

void for_each_mpi_piece(size_t n, size_t elem_bytes, const std::string& what, const char* unit,
                        const std::function<void(size_t first, int count, const std::string& name)>& post) {
  const size_t piece = mpi_piece_elems(elem_bytes);
  for (size_t done = 0; done < n; done += piece) {
    const size_t len = std::min(n - done, piece);
    post(done, static_cast<int>(len),
         len < n ? strprintf("%s (%s %zu..%zu)", what.c_str(), unit, done, done + len - 1) : what);
  }
}

void mpi_allreduce_in_place(void* data, size_t n, MPI_Datatype type, size_t elem_bytes, MPI_Op op,
                            const std::string& what) {
  if (g_size == 1 || n == 0) return;
  auto* bytes = static_cast<char*>(data);
  for_each_mpi_piece(n, elem_bytes, what, "elements", [&](size_t first, int count, const std::string& name) {
    run_collective(name, [&](MPI_Request* r) {
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, bytes + first * elem_bytes, count, type, op, MPI_COMM_WORLD, r));
    });
  });
}

namespace {

const char* op_name(MPI_Op op) { return op == MPI_SUM ? "sum" : op == MPI_MAX ? "max" : "min"; }

template <class T>
void allreduce_in_place(T* data, size_t n, MPI_Datatype type, MPI_Op op, const char* what) {
  mpi_allreduce_in_place(data, n, type, sizeof(T), op,
                         strprintf("MPI allreduce (%s) of %s", op_name(op), count_of(n, what).c_str()));
}

}  // namespace

void allreduce_sum(float* data, size_t n) { allreduce_in_place(data, n, MPI_FLOAT, MPI_SUM, "float"); }
void allreduce_sum(double* data, size_t n) { allreduce_in_place(data, n, MPI_DOUBLE, MPI_SUM, "double"); }
void allreduce_sum(int64_t* data, size_t n) { allreduce_in_place(data, n, MPI_INT64_T, MPI_SUM, "int64"); }

int allreduce_max(int v) {
  allreduce_in_place(&v, 1, MPI_INT, MPI_MAX, "int");
  return v;
}

int allreduce_min(int v) {
  allreduce_in_place(&v, 1, MPI_INT, MPI_MIN, "int");
  return v;
}

void allreduce_min(int* data, size_t n) { allreduce_in_place(data, n, MPI_INT, MPI_MIN, "int"); }

void broadcast(void* data, size_t bytes, int root) {
  if (g_size == 1 || bytes == 0) return;
  auto* p = static_cast<char*>(data);
  for_each_mpi_piece(bytes, 1, strprintf("MPI broadcast of %s from rank %d", count_of(bytes, "byte").c_str(), root),
                     "bytes", [&](size_t first, int count, const std::string& name) {
                       run_collective(name, [&](MPI_Request* r) {
                         MPI_CHECK(MPI_Ibcast(p + first, count, MPI_BYTE, root, MPI_COMM_WORLD, r));
                       });
                     });
}

void allgather(const uint64_t* mine, size_t n, uint64_t* out) {
  if (g_size == 1) {
    std::copy_n(mine, n, out);
    return;
  }
  // The receive side holds world_size * n values; both counts must fit MPI's int.
  CNN_CHECK(n * static_cast<size_t>(g_size) <= g_max_count, "allgather of %zu values from %d ranks exceeds MPI's "
            "int count", n, g_size);
  run_collective(strprintf("MPI allgather of %s", count_of(n, "uint64").c_str()), [&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallgather(mine, static_cast<int>(n), MPI_UINT64_T, out, static_cast<int>(n), MPI_UINT64_T,
                             MPI_COMM_WORLD, r));
  });
}

void allgather_bytes(void* buf, const std::vector<size_t>& offsets) {
  CNN_CHECK(offsets.size() == static_cast<size_t>(g_size) + 1, "%zu offsets for %d ranks", offsets.size(), g_size);
  for (int r = 0; r < g_size; ++r)
    CNN_CHECK(offsets[r] <= offsets[r + 1], "allgather_bytes: offsets decrease at rank %d", r);
  if (g_size == 1) return;
  if (offsets.back() <= g_max_count) {  // every count and displacement fits an int
    std::vector<int> counts(g_size), displs(g_size);
    for (int r = 0; r < g_size; ++r) {
      counts[r] = static_cast<int>(offsets[r + 1] - offsets[r]);
      displs[r] = static_cast<int>(offsets[r]);
    }
    run_collective(strprintf("MPI allgatherv of %s", count_of(offsets.back(), "byte").c_str()),
                   [&](MPI_Request* r) {
                     MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(),
                                               displs.data(), MPI_BYTE, MPI_COMM_WORLD, r));
                   });
    return;
  }
  // Beyond: displacements no longer fit an int, so each rank broadcasts its share (in pieces, see broadcast).
  auto* p = static_cast<char*>(buf);
  for (int r = 0; r < g_size; ++r) broadcast(p + offsets[r], offsets[r + 1] - offsets[r], r);
}

void broadcast(std::string& s, int root) {
  if (g_size == 1) return;
  uint64_t n = s.size();
  broadcast(&n, sizeof n, root);
  s.resize(n);
  broadcast(&s[0], n, root);
}

void node_broadcast(std::string& s, int local_root) {
  if (g_local_size == 1) return;
  uint64_t n = s.size();
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, local_root, g_node_comm));
  s.resize(n);
  if (n) MPI_CHECK(MPI_Bcast(&s[0], static_cast<int>(n), MPI_CHAR, local_root, g_node_comm));
}

void agree_or_exit(int code, const std::string& message) {
  int worst = allreduce_max(code);
  if (worst == 0) return;
  int first = allreduce_min(code != 0 ? g_rank : INT_MAX);
  // The lowest failing rank speaks for all; its exit code is the job's.
  int first_code = code;
  broadcast(&first_code, sizeof first_code, first);
  if (g_rank == first) {
    std::string tag = g_size > 1 ? " " + rank_tag() : "";
    std::fprintf(stderr, "cnntrain: error%s: %s\n", tag.c_str(), message.c_str());
    std::fflush(stderr);
  }
  comm_finalize();
  std::fflush(nullptr);
  std::exit(first_code);
}

}  // namespace cnn
