// Collectives over a device backend's memory through MPI on host copies (src/comm/collectives.h).
#include <vector>

#include "src/comm/collectives.h"
#include "src/comm/grad_sync.h"

namespace cnn {

namespace {

// The device gradient mirrored on the host: each bucket is downloaded when launched and summed by an MPI
// GradSync over the mirror with the same bucket layout (so its on_ready(begin of bucket i) launches exactly
// bucket i); complete() waits and uploads the sum.
class StagedGradSync final : public BucketedGradSync {
 public:
  StagedGradSync(Collectives* owner, Collectives& mpi, Backend& be, float* grads, size_t n, const GradSyncOptions& o)
      : BucketedGradSync(owner, grads, n, o), be_(be), device_(grads), host_(n) {
    inner_ = mpi.make_grad_sync(host_.data(), n, o);
  }

 protected:
  void launch(size_t i, float* data, size_t n, const std::string&) override {
    const size_t begin = static_cast<size_t>(data - device_);
    be_.download(host_.data() + begin, data, sizeof(float) * n);
    inner_->on_ready(begin);
  }
  double complete() override {
    const double waited = inner_->finish();
    be_.upload(device_, host_.data(), sizeof(float) * host_.size());
    return waited;
  }

 private:
  Backend& be_;
  float* device_;
  std::vector<float> host_;
  std::unique_ptr<GradSync> inner_;
};

class HostStagedCollectives final : public Collectives {
 public:
  explicit HostStagedCollectives(Backend& be) : be_(be), mpi_(make_mpi_collectives()) {}
  std::string describe() const override {
    return "MPI on host copies of device memory (download, allreduce, upload; --comm.backend mpi)";
  }
  int ranks() const override { return mpi_->ranks(); }
  void allreduce_sum(float* data, size_t n, const std::string& what) override { staged(data, n, what); }
  void allreduce_sum(double* data, size_t n, const std::string& what) override { staged(data, n, what); }
  void allreduce_sum_host(double* data, size_t n, const std::string& what) override {
    mpi_->allreduce_sum_host(data, n, what);
  }
  std::unique_ptr<GradSync> make_grad_sync(float* grads, size_t n, const GradSyncOptions& o) override {
    return std::make_unique<StagedGradSync>(this, *mpi_, be_, grads, n, o);
  }

 private:
  template <class T>
  void staged(T* data, size_t n, const std::string& what) {
    std::vector<T> host(n);
    be_.download(host.data(), data, sizeof(T) * n);
    mpi_->allreduce_sum(host.data(), n, what);
    be_.upload(data, host.data(), sizeof(T) * n);
  }

  Backend& be_;
  std::unique_ptr<Collectives> mpi_;
};

}  // namespace

std::unique_ptr<Collectives> make_host_staged_collectives(Backend& be) {
  return std::make_unique<HostStagedCollectives>(be);
}

}  // namespace cnn
