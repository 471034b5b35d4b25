#include "src/comm/comm.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "src/base/error.h"

#define MPI_CHECK(call)                                                      \
  do {                                                                       \
    int mpi_rc_ = (call);                                                    \
    if (mpi_rc_ != MPI_SUCCESS) ::cnn::mpi_failed(#call, __FILE__, __LINE__, mpi_rc_); \
  } while (0)

namespace cnn {

namespace {
bool g_init = false;
int g_rank = 0, g_size = 1, g_local_rank = 0, g_local_size = 1, g_nodes = 1;
std::string g_host;
}  // namespace

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
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &g_local_rank));
  MPI_CHECK(MPI_Comm_size(local, &g_local_size));
  MPI_CHECK(MPI_Comm_free(&local));
  int leader = g_local_rank == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(&leader, &g_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  set_process_identity(g_rank, g_size, g_host);
  set_abort_handler(comm_abort);
}

void comm_finalize() {
  if (!g_init) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
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
const std::string& host_name() { return g_host; }

std::string topology_summary() {
  const int kLen = 64;
  std::vector<char> mine(kLen, 0), all(static_cast<size_t>(kLen) * g_size, 0);
  std::copy_n(g_host.begin(), std::min<size_t>(g_host.size(), kLen - 1), mine.begin());
  MPI_CHECK(MPI_Allgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD));
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

void barrier() { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

void allreduce_sum(float* data, size_t n) {
  if (g_size == 1 || n == 0) return;
  CNN_CHECK(n <= static_cast<size_t>(INT_MAX), "allreduce of %zu floats exceeds MPI's int count", n);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
}

void allreduce_sum(double* data, size_t n) {
  if (g_size == 1 || n == 0) return;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

void allreduce_sum(int64_t* data, size_t n) {
  if (g_size == 1 || n == 0) return;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
}

int allreduce_max(int v) {
  if (g_size == 1) return v;
  int out = v;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

int allreduce_min(int v) {
  if (g_size == 1) return v;
  int out = v;
  MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return out;
}

void broadcast(void* data, size_t bytes, int root) {
  if (g_size == 1 || bytes == 0) return;
  CNN_CHECK(bytes <= static_cast<size_t>(INT_MAX), "broadcast of %zu bytes is too large", bytes);
  MPI_CHECK(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

void allgather(const uint64_t* mine, size_t n, uint64_t* out) {
  if (g_size == 1) {
    std::copy_n(mine, n, out);
    return;
  }
  MPI_CHECK(MPI_Allgather(mine, static_cast<int>(n), MPI_UINT64_T, out, static_cast<int>(n), MPI_UINT64_T,
                          MPI_COMM_WORLD));
}

void allgather_bytes(void* buf, const std::vector<size_t>& offsets) {
  CNN_CHECK(offsets.size() == static_cast<size_t>(g_size) + 1, "%zu offsets for %d ranks", offsets.size(), g_size);
  if (g_size == 1) return;
  // Large shares go through a derived datatype of 1 MiB blocks so counts stay within int.
  const size_t kBlock = 1 << 20;
  bool small = offsets.back() < static_cast<size_t>(INT_MAX);
  std::vector<int> counts(g_size), displs(g_size);
  if (small) {
    for (int r = 0; r < g_size; ++r) {
      counts[r] = static_cast<int>(offsets[r + 1] - offsets[r]);
      displs[r] = static_cast<int>(offsets[r]);
    }
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), MPI_BYTE,
                             MPI_COMM_WORLD));
    return;
  }
  // Beyond 2 GiB: broadcast each rank's share in blocks (rare: checkpoints of multi-GB models).
  auto* p = static_cast<char*>(buf);
  for (int r = 0; r < g_size; ++r)
    for (size_t off = offsets[r]; off < offsets[r + 1]; off += kBlock)
      broadcast(p + off, std::min(kBlock, offsets[r + 1] - off), r);
}

void broadcast(std::string& s, int root) {
  if (g_size == 1) return;
  uint64_t n = s.size();
  broadcast(&n, sizeof n, root);
  s.resize(n);
  broadcast(&s[0], n, root);
}

struct AsyncAllreduce::Impl {
  std::vector<MPI_Request> reqs;
};

AsyncAllreduce::AsyncAllreduce() : impl_(new Impl) {}
AsyncAllreduce::~AsyncAllreduce() { delete impl_; }

void AsyncAllreduce::start(float* data, size_t n) {
  if (g_size == 1 || n == 0) return;
  CNN_CHECK(n <= static_cast<size_t>(INT_MAX), "bucket of %zu floats exceeds MPI's int count", n);
  MPI_Request r;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r));
  impl_->reqs.push_back(r);
}

void AsyncAllreduce::test_some() {
  if (impl_->reqs.empty()) return;
  int flag = 0;
  MPI_CHECK(MPI_Testall(static_cast<int>(impl_->reqs.size()), impl_->reqs.data(), &flag, MPI_STATUSES_IGNORE));
  if (flag) impl_->reqs.clear();
}

void AsyncAllreduce::wait_all() {
  if (impl_->reqs.empty()) return;
  MPI_CHECK(MPI_Waitall(static_cast<int>(impl_->reqs.size()), impl_->reqs.data(), MPI_STATUSES_IGNORE));
  impl_->reqs.clear();
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
