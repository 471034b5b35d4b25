// Batch normalisation (optionally over fixed "ghost" groups of samples).
#include <vector>

#include "src/base/error.h"
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
    }
  }
  std::string describe() const override {
    return strprintf("batchnorm %d eps %g momentum %g%s", c_, o_.eps, o_.momentum,
                     o_.group > 0 ? strprintf(" group %d", o_.group).c_str() : "");
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
  }
  void forward(Backend& be, const void* x, void* y, int n, bool train) override {
    be.set_label(name_.c_str());
    if (!train) {
      batchnorm_forward_infer(be, dt_, n * in_.h * in_.w, c_, x, gamma_, beta_, rmean_, rvar_, o_.eps, y);
      return;
    }
    const int g = group_of(n);
    const size_t bytes = static_cast<size_t>(g) * in_.size() * act_size();  // one group's activations
    for (int i = 0; i < n / g; ++i)
      batchnorm_forward_train(be, dt_, g * in_.h * in_.w, c_, at(x, i * bytes), gamma_, beta_, o_.eps, o_.momentum,
                              at(y, i * bytes), save_mean_ + i * c_, save_invstd_ + i * c_, rmean_, rvar_);
  }
  void backward(Backend& be, const void* x, const void*, const void* dy, void* dx, int n) override {
    be.set_label(name_.c_str());
    const int g = group_of(n);
    const size_t bytes = static_cast<size_t>(g) * in_.size() * act_size();
    for (int i = 0; i < n / g; ++i)
      batchnorm_backward(be, dt_, g * in_.h * in_.w, c_, at(x, i * bytes), at(dy, i * bytes), gamma_,
                         save_mean_ + i * c_, save_invstd_ + i * c_, dx ? at(dx, i * bytes) : nullptr, dgamma_,
                         dbeta_);
  }
  double flops_per_sample() const override { return 2.0 * in_.size(); }

 private:
  static const void* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
  static void* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }
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
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm(const std::string& name, const BnOptions& opt) {
  return std::make_unique<BatchNorm>(name, opt);
}

}  // namespace cnn
