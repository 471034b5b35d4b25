// Collectives over host memory through MPI: the CPU backend's gradient averaging and synchronised batch norm.
#include <algorithm>
#include <chrono>
#include <climits>

#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/comm/mpi_wait.h"

namespace cnn {

namespace {

template <class T>
void allreduce_now(T* data, size_t n, MPI_Datatype type, const std::string& what) {
  if (world_size() == 1 || n == 0) return;
  const size_t piece = mpi_piece_elems(sizeof(T));
  for (size_t done = 0; done < n; done += piece) {
    const size_t len = std::min(n - done, piece);
    run_collective(len < n ? strprintf("%s (elements %zu..%zu)", what.c_str(), done, done + len - 1) : what,
                   [&](MPI_Request* r) {
                     MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(len), type, MPI_SUM,
                                              MPI_COMM_WORLD, r));
                   });
  }
}

class MpiGradSync final : public GradSync {
 public:
  using GradSync::GradSync;

 protected:
  void launch(size_t, float* data, size_t n, const std::string& what) override {
    if (world_size() == 1) return;
    const size_t piece = mpi_piece_elems(sizeof(float));
    for (size_t done = 0; done < n; done += piece) {
      const size_t len = std::min(n - done, piece);
      PendingCollective p =
          begin_collective(len < n ? strprintf("%s (elements %zu..%zu)", what.c_str(), done, done + len - 1) : what);
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(len), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               &p.req));
      pending_.push_back(p);
    }
  }
  // Without an MPI progress thread, non-blocking collectives move only inside MPI calls: poke them.
  void progress() override { test_collectives(pending_); }
  double complete() override {
    const auto t0 = std::chrono::steady_clock::now();
    wait_collectives(pending_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  std::vector<PendingCollective> pending_;
};

class MpiCollectives final : public Collectives {
 public:
  std::string describe() const override { return "MPI on host memory (non-blocking allreduce per bucket)"; }
  void allreduce_sum(float* data, size_t n, const std::string& what) override {
    allreduce_now(data, n, MPI_FLOAT, what);
  }
  void allreduce_sum(double* data, size_t n, const std::string& what) override {
    allreduce_now(data, n, MPI_DOUBLE, what);
  }
  std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) override {
    return std::make_unique<MpiGradSync>(this, grads, n, o);
  }
};

}  // namespace

std::unique_ptr<Collectives> make_mpi_collectives() { return std::make_unique<MpiCollectives>(); }

}  // namespace cnn
