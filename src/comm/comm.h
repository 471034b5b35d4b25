// The MPI layer: world/node-local ranks, checked collectives and the job-wide abort. Only src/comm (and the
// checkpoint's MPI-IO) include mpi.h (tests/layers/check_includes.sh); everything else talks to MPI through
// these functions, or sums training numbers through the Collectives it is given (kernels/collectives.h):
// the functions here serve the process group's coordination (agreement on errors, broadcasts of decisions,
// gathers of reports). Every collective here has the watchdog's deadline (src/comm/watchdog.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

// MPI_Init_thread (funneled: only the main thread calls MPI); works under mpirun, srun and as a singleton.
void comm_init(int* argc, char*** argv);
void comm_finalize();
bool comm_initialized();
// Ends the job: MPI_Abort(code) when several ranks exist, otherwise a plain exit with `code`.
[[noreturn]] void comm_abort(int code);

int world_rank();
int world_size();
int local_rank();  // rank among the processes on this node (MPI_COMM_TYPE_SHARED)
int local_size();
int num_nodes();
// The world ranks on this node, in node-local order (node_ranks()[local_rank()] == world_rank()).
const std::vector<int>& node_ranks();
const std::string& host_name();
// One line for rank 0 to print: ranks, nodes, ranks per node and the host names (collective).
std::string topology_summary();

// Collectives over MPI_COMM_WORLD; each waits in the watchdog's polling loop (below). MPI counts are ints: transfers longer than max_count_per_call() elements
// (or 1 GiB) are split into several calls (allreduce, broadcast) or go another way (allgather_bytes); where
// a split cannot keep the meaning (allgather), the call fails with a clear message instead of overflowing.
void barrier();
void allreduce_sum(float* data, size_t n);
void allreduce_sum(double* data, size_t n);
void allreduce_sum(int64_t* data, size_t n);
int allreduce_max(int v);
int allreduce_min(int v);
// Element-wise minimum of n ints over the ranks, in place.
void allreduce_min(int* data, size_t n);
void broadcast(void* data, size_t bytes, int root);
// Every rank contributes `n` uint64 values; out receives world_size * n of them in rank order.
void allgather(const uint64_t* mine, size_t n, uint64_t* out);
// Rank r contributes bytes [offsets[r], offsets[r+1]) of `buf` (its own share already in place); afterwards
// every rank holds the whole buffer. offsets has world_size + 1 entries. Up to max_count_per_call() bytes
// in total it is one MPI_Allgatherv; beyond, each rank's share is broadcast in pieces.
void allgather_bytes(void* buf, const std::vector<size_t>& offsets);
void broadcast(std::string& s, int root);

// The most elements one MPI call carries: INT_MAX. Tests lower it (set_max_count_per_call) to exercise the
// split paths on small buffers; 0 restores INT_MAX.
size_t max_count_per_call();
void set_max_count_per_call(size_t n);

// Every collective above waits in a polling loop with the watchdog's deadline (src/comm/watchdog.h). The
// hook, when set, runs in that loop: the emulated NCCL progresses queued device work there, as a GPU would
// while the host waits.
void set_wait_progress_hook(void (*hook)());

// Node-local: the node's rank `local_root` sends `s` (shorter than 2 GiB) to the other ranks of its node. A
// blocking MPI_Bcast outside the watchdog's deadline: the others wait as long as the root's node-local work
// takes (staging a dataset, io/stage.h), which no collective timeout can bound.
void node_broadcast(std::string& s, int local_root);

// After a phase in which each rank may have failed on its own (config, opening files): all ranks learn
// whether any failed. If one did, the lowest failing rank prints its message, every rank finalizes MPI and
// exits with that rank's exit code, so no rank is left waiting in a collective. Returns when none failed.
void agree_or_exit(int code, const std::string& message);

}  // namespace cnn
