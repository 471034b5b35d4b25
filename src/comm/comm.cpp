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
size_t g_max_count = INT_MAX;
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

size_t max_count_per_call() { return g_max_count; }
void set_max_count_per_call(size_t n) { g_max_count = n ? std::min<size_t>(n, INT_MAX) : INT_MAX; }

namespace {
// Elements of T one call carries: the int count limit, and 1 GiB (MPI implementations have had overflows in
// the byte arithmetic of messages near 2 GiB).
template <class T>
size_t piece_elems() {
  return std::min(g_max_count, (size_t{1} << 30) / sizeof(T));
}

// In-place sum over the ranks in pieces.
template <class T>
void allreduce_sum_pieces(T* data, size_t n, MPI_Datatype type) {
  if (g_size == 1) return;
  for (size_t done = 0; done < n;) {
    const size_t len = std::min(n - done, piece_elems<T>());
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(len), type, MPI_SUM, MPI_COMM_WORLD));
    done += len;
  }
}
}  // namespace

void allreduce_sum(float* data, size_t n) { allreduce_sum_pieces(data, n, MPI_FLOAT); }
void allreduce_sum(double* data, size_t n) { allreduce_sum_pieces(data, n, MPI_DOUBLE); }
void allreduce_sum(int64_t* data, size_t n) { allreduce_sum_pieces(data, n, MPI_INT64_T); }

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

void allreduce_min(int* data, size_t n) {
  if (g_size == 1) return;
  CNN_CHECK(n <= g_max_count, "allreduce_min of %zu ints exceeds MPI's int count", n);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_INT, MPI_MIN, MPI_COMM_WORLD));
}

void broadcast(void* data, size_t bytes, int root) {
  if (g_size == 1) return;
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes;) {
    const size_t len = std::min(bytes - done, piece_elems<char>());
    MPI_CHECK(MPI_Bcast(p + done, static_cast<int>(len), MPI_BYTE, root, MPI_COMM_WORLD));
    done += len;
  }
}

void allgather(const uint64_t* mine, size_t n, uint64_t* out) {
  if (g_size == 1) {
    std::copy_n(mine, n, out);
    return;
  }
  // The receive side holds world_size * n values; both counts must fit MPI's int.
  CNN_CHECK(n * static_cast<size_t>(g_size) <= g_max_count, "allgather of %zu values from %d ranks exceeds MPI's "
            "int count", n, g_size);
  MPI_CHECK(MPI_Allgather(mine, static_cast<int>(n), MPI_UINT64_T, out, static_cast<int>(n), MPI_UINT64_T,
                          MPI_COMM_WORLD));
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
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), MPI_BYTE,
                             MPI_COMM_WORLD));
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

struct AsyncAllreduce::Impl {
  std::vector<MPI_Request> reqs;
};

AsyncAllreduce::AsyncAllreduce() : impl_(new Impl) {}
AsyncAllreduce::~AsyncAllreduce() { delete impl_; }

void AsyncAllreduce::start(float* data, size_t n) {
  if (g_size == 1) return;
  for (size_t done = 0; done < n;) {
    const size_t len = std::min(n - done, piece_elems<float>());
    MPI_Request r;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(len), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                             &r));
    impl_->reqs.push_back(r);
    done += len;
  }
}

void AsyncAllreduce::test_some() {
  if (impl_->reqs.empty()) return;
  int flag = 0;
  MPI_CHECK(MPI_Testall(static_cast<int>(impl_->reqs.size()), impl_->reqs.data(), &flag, MPI_STATUSES_IGNORE));
  if (flag) impl_->reqs.clear();
}

size_t AsyncAllreduce::in_flight() const { return impl_->reqs.size(); }

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
