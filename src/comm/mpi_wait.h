// Internal to src/comm: MPI error checks and waiting for MPI collectives under the watchdog's deadline. Only
// src/comm/*.cpp include this (and with it mpi.h).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cnn {

[[noreturn]] void mpi_failed(const char* expr, const char* file, int line, int rc);

#define MPI_CHECK(call)                                                                \
  do {                                                                                 \
    int mpi_rc_ = (call);                                                              \
    if (mpi_rc_ != MPI_SUCCESS) ::cnn::mpi_failed(#call, __FILE__, __LINE__, mpi_rc_); \
  } while (0)

// Elements of elem_bytes each that one MPI call may carry: max_count_per_call() (MPI counts are ints) and
// 1 GiB (implementations have had overflows in their byte arithmetic near 2 GiB). Longer transfers are split.
size_t mpi_piece_elems(size_t elem_bytes);
// Splits a transfer of n elements into pieces of at most mpi_piece_elems(elem_bytes) and calls
// post(first, count, name) for each in order; name is `what`, with "(UNIT first..last)" appended when there
// is more than one piece (the watchdog then names the piece that stalled).
void for_each_mpi_piece(size_t n, size_t elem_bytes, const std::string& what, const char* unit,
                        const std::function<void(size_t first, int count, const std::string& name)>& post);
// Sums (op) n elements in place over MPI_COMM_WORLD, piece by piece, each piece one watchdog-timed collective.
void mpi_allreduce_in_place(void* data, size_t n, MPI_Datatype type, size_t elem_bytes, MPI_Op op,
                            const std::string& what);

// Reductions of 16-bit floats carried as MPI_UINT16_T (bf16 when `bf16`, else IEEE binary16): each combination
// widens both operands to float, combines them in float and rounds to nearest even. Commutative; created on
// first use (main thread) and kept until MPI_Finalize.
enum class Mpi16Op { kSum, kProd, kMax, kMin };
MPI_Op mpi_16bit_op(bool bf16, Mpi16Op op);

// A non-blocking MPI collective this rank has arrived at: its request and its watchdog sequence number.
struct PendingCollective {
  MPI_Request req = MPI_REQUEST_NULL;
  uint64_t seq = 0;
  double started = 0;
};

// Registers the collective `what` (named with the current training step) with the watchdog; call right
// before posting it, then set .req.
PendingCollective begin_collective(const std::string& what);
// Completes the finished ones (removing them) without waiting.
void test_collectives(std::vector<PendingCollective>& pending);
// Main thread: waits for all of them in a polling loop that runs the wait-progress hook, and ends the job
// through the watchdog when the oldest has waited past the deadline.
void wait_collectives(std::vector<PendingCollective>& pending);
// One collective: begin_collective, post (the callback fills the request), wait.
template <class Post>
void run_collective(const std::string& what, Post post) {
  std::vector<PendingCollective> p{begin_collective(what)};
  post(&p[0].req);
  wait_collectives(p);
}

}  // namespace cnn
