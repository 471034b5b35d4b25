// Collectives over host memory through MPI: the CPU backend's gradient averaging and synchronised batch norm.
#include <chrono>

#include "src/base/half_bits.h"
#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/comm/grad_sync.h"
#include "src/comm/mpi_wait.h"

namespace cnn {

namespace {

class MpiGradSync final : public BucketedGradSync {
 public:
  MpiGradSync(Collectives* owner, float* grads, size_t n, const GradSyncOptions& o)
      : BucketedGradSync(owner, grads, n, o), wire16_(o.wire != GradWire::kF32 && world_size() > 1) {
    if (wire16_) stage_.resize(n);
  }

 protected:
  void launch(size_t, float* data, size_t n, const std::string& what) override {
    if (world_size() == 1) return;
    char* buf = reinterpret_cast<char*>(data);
    size_t elem = sizeof(float);
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    if (wire16_) {
      const bool bf16 = options().wire == GradWire::kBF16;
      uint16_t* s = stage_.data() + (data - grads());
      (bf16 ? simt::detail::floats_to_bf16_bits : simt::detail::floats_to_half_bits)(data, s, n);
      buf = reinterpret_cast<char*>(s);
      elem = sizeof(uint16_t);
      type = MPI_UINT16_T;
      op = mpi_16bit_op(bf16, Mpi16Op::kSum);
    }
    for_each_mpi_piece(n, elem, what, "elements", [&](size_t first, int count, const std::string& name) {
      PendingCollective p = begin_collective(name);
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + first * elem, count, type, op, MPI_COMM_WORLD, &p.req));
      pending_.push_back(p);
    });
  }
  // Without an MPI progress thread, non-blocking collectives move only inside MPI calls: poke them.
  void progress() override { test_collectives(pending_); }
  double complete() override {
    const auto t0 = std::chrono::steady_clock::now();
    wait_collectives(pending_);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wire16_) {  // the 16-bit sums back into the fp32 gradient
      const bool bf16 = options().wire == GradWire::kBF16;
      (bf16 ? simt::detail::bf16_bits_to_floats : simt::detail::half_bits_to_floats)(stage_.data(), grads(),
                                                                                      stage_.size());
    }
    return waited;
  }

 private:
  const bool wire16_;             // the gradient travels in 16 bits (--comm.grad_dtype bf16|fp16, several ranks)
  std::vector<uint16_t> stage_;  // its 16-bit copy, summed in place
  std::vector<PendingCollective> pending_;
};

class MpiCollectives final : public Collectives {
 public:
  std::string describe() const override { return "MPI on host memory (non-blocking allreduce per bucket)"; }
  int ranks() const override { return world_size(); }
  void allreduce_sum(float* data, size_t n, const std::string& what) override {
    mpi_allreduce_in_place(data, n, MPI_FLOAT, sizeof(float), MPI_SUM, what);
  }
  void allreduce_sum(double* data, size_t n, const std::string& what) override {
    mpi_allreduce_in_place(data, n, MPI_DOUBLE, sizeof(double), MPI_SUM, what);
  }
  void allreduce_sum_host(double* data, size_t n, const std::string& what) override {
    allreduce_sum(data, n, what);
  }
  std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) override {
    return std::make_unique<MpiGradSync>(this, grads, n, o);
  }
};

}  // namespace

std::unique_ptr<Collectives> make_mpi_collectives() { return std::make_unique<MpiCollectives>(); }

}  // namespace cnn
