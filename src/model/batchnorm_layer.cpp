// Batch normalisation (optionally over fixed "ghost" groups of samples, or synchronised over all ranks).
#include <vector>

#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/model/layers.h"

namespace cnn {

namespace {

class BatchNorm : public Layer {
 public:
  BatchNorm(const std::string& name, const BnOptions& o) : Layer(name), o_(o) {}
  ~BatchNorm() override {
    if (be_) {
      be_->release(save_mean_);
      be_->release(save_invstd_);
      be_->release(stats_);
      be_->release(sums_local_);
      be_->release(sums_global_);
    }
  }
  std::string describe() const override {
    return strprintf("batchnorm %d eps %g momentum %g%s%s", c_, o_.eps, o_.momentum,
                     o_.group > 0 ? strprintf(" group %d", o_.group).c_str() : "", o_.sync ? " sync" : "");
  }
  Dims setup(const Dims& in) override {
    in_ = in;
    c_ = in.c;
    return in;
  }
  std::vector<ParamSpec> param_specs() const override {
    return {{"weight", {c_}, Init::kOne, 1, false}, {"bias", {c_}, Init::kZero, 1, false}};
  }
  std::vector<ParamSpec> buffer_specs() const override {
    return {{"running_mean", {c_}, Init::kZero, 1, false}, {"running_var", {c_}, Init::kOne, 1, false}};
  }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    gamma_ = p[0];
    beta_ = p[1];
    dgamma_ = g[0];
    dbeta_ = g[1];
  }
  void bind_buffers(const std::vector<float*>& b) override {
    rmean_ = b[0];
    rvar_ = b[1];
  }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    const int groups = o_.group > 0 ? (max_n + o_.group - 1) / o_.group : 1;
    save_mean_ = static_cast<float*>(be.alloc(sizeof(float) * c_ * groups));
    save_invstd_ = static_cast<float*>(be.alloc(sizeof(float) * c_ * groups));
    if (o_.sync) {
      const size_t bytes = sizeof(double) * (2 * c_ + 1);
      stats_ = static_cast<double*>(be.alloc(bytes));
      sums_local_ = static_cast<double*>(be.alloc(bytes));
      sums_global_ = static_cast<double*>(be.alloc(bytes));
    }
  }
  void set_batch(const BatchContext& ctx) override { comm_ = ctx.comm; }
  void forward(Backend& be, const float* x, float* y, int n, bool train) override {
    be.set_label(name_.c_str());
    if (!train) {
      be.batchnorm_forward_infer(n * in_.h * in_.w, c_, x, gamma_, beta_, rmean_, rvar_, o_.eps, y);
      return;
    }
    if (o_.sync) {
      const int rows = n * in_.h * in_.w;
      be.batchnorm_stats(rows, c_, x, stats_);
      if (comm_) comm_->allreduce_sum(stats_, 2 * c_ + 1, name_ + " batch-norm statistics");
      be.batchnorm_forward_from_stats(rows, c_, x, stats_, gamma_, beta_, o_.eps, o_.momentum, y, save_mean_,
                                      save_invstd_, rmean_, rvar_);
      return;
    }
    const int g = group_of(n);
    const size_t stride = static_cast<size_t>(g) * in_.size();
    for (int i = 0; i < n / g; ++i)
      be.batchnorm_forward_train(g * in_.h * in_.w, c_, x + i * stride, gamma_, beta_, o_.eps, o_.momentum,
                                 y + i * stride, save_mean_ + i * c_, save_invstd_ + i * c_, rmean_, rvar_);
  }
  void backward(Backend& be, const float* x, const float*, const float* dy, float* dx, int n) override {
    be.set_label(name_.c_str());
    if (o_.sync) {
      // This rank's sums give its share of dgamma/dbeta (the gradient allreduce adds the shares up); dx needs
      // the sums over the global batch.
      const int rows = n * in_.h * in_.w;
      be.batchnorm_backward_sums(rows, c_, x, dy, save_mean_, save_invstd_, sums_local_);
      const double* global = sums_local_;
      if (comm_) {
        be.copy(sums_global_, sums_local_, sizeof(double) * (2 * c_ + 1));
        comm_->allreduce_sum(sums_global_, 2 * c_ + 1, name_ + " batch-norm gradient sums");
        global = sums_global_;
      }
      be.batchnorm_backward_from_sums(rows, c_, x, dy, gamma_, save_mean_, save_invstd_, sums_local_, global, dx,
                                      dgamma_, dbeta_);
      return;
    }
    const int g = group_of(n);
    const size_t stride = static_cast<size_t>(g) * in_.size();
    for (int i = 0; i < n / g; ++i)
      be.batchnorm_backward(g * in_.h * in_.w, c_, x + i * stride, dy + i * stride, gamma_, save_mean_ + i * c_,
                            save_invstd_ + i * c_, dx ? dx + i * stride : nullptr, dgamma_, dbeta_);
  }
  double flops_per_sample() const override { return 2.0 * in_.size(); }

 private:
  int group_of(int n) const {
    if (o_.group <= 0) return n;
    CNN_CHECK(n % o_.group == 0, "layer %s: %d samples are not a multiple of the batch-norm group %d",
              name_.c_str(), n, o_.group);
    return o_.group;
  }

  BnOptions o_;
  Dims in_;
  int c_ = 0;
  Backend* be_ = nullptr;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *rmean_ = nullptr, *rvar_ = nullptr, *save_mean_ = nullptr, *save_invstd_ = nullptr;
  // Synchronised batch norm: statistics and gradient sums, double [2c+1] each; the ranks to sum them over.
  double *stats_ = nullptr, *sums_local_ = nullptr, *sums_global_ = nullptr;
  Collectives* comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm(const std::string& name, const BnOptions& opt) {
  return std::make_unique<BatchNorm>(name, opt);
}

}  // namespace cnn
