// Batch normalisation, dropout, average and global average pooling (the layer set beyond the skeleton).
#include <numeric>
#include <vector>

#include "kernels/rng.h"
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
  void forward(Backend& be, const float* x, float* y, int n, bool train) override {
    if (!train) {
      be.batchnorm_forward_infer(n * in_.h * in_.w, c_, x, gamma_, beta_, rmean_, rvar_, o_.eps, y);
      return;
    }
    const int g = group_of(n);
    const size_t stride = static_cast<size_t>(g) * in_.size();
    for (int i = 0; i < n / g; ++i)
      be.batchnorm_forward_train(g * in_.h * in_.w, c_, x + i * stride, gamma_, beta_, o_.eps, o_.momentum,
                                 y + i * stride, save_mean_ + i * c_, save_invstd_ + i * c_, rmean_, rvar_);
  }
  void backward(Backend& be, const float* x, const float*, const float* dy, float* dx, int n) override {
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
};

const uint64_t kDropoutStream = 0x44524f50ull;  // "DROP": keeps masks apart from other RNG uses of the seed

// FNV-1a: a layer's dropout stream must not depend on std::hash, which differs between libraries.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

class Dropout : public Layer {
 public:
  Dropout(const std::string& name, float p) : Layer(name), p_(p) {
    if (!(p >= 0.f && p < 1.f))
      raise(kExitUsage, "layer %s: dropout probability %g must be in [0, 1)", name.c_str(), p);
  }
  ~Dropout() override {
    if (be_) {
      be_->release(mask_);
      be_->release(iota_);
    }
  }
  std::string describe() const override { return strprintf("dropout p=%g", p_); }
  Dims setup(const Dims& in) override {
    size_ = in.size();
    return in;
  }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    mask_ = static_cast<uint8_t*>(be.alloc(size_ * max_n));
    std::vector<int64_t> ids(max_n);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    iota_ = static_cast<int64_t*>(be.alloc(sizeof(int64_t) * max_n));
    be.upload(iota_, ids.data(), sizeof(int64_t) * max_n);
  }
  void set_batch(const BatchContext& ctx) override { ctx_ = ctx; }
  void forward(Backend& be, const float* x, float* y, int n, bool train) override {
    train_ = train;
    if (!train || p_ == 0.f) {
      be.copy(y, x, sizeof(float) * size_ * n);
      return;
    }
    const uint64_t key = hash_key(ctx_.seed ^ kDropoutStream, static_cast<uint64_t>(ctx_.step), name_hash(name_));
    be.dropout_forward(n, size_, x, p_, key, ctx_.ids ? ctx_.ids : iota_, y, mask_);
  }
  void backward(Backend& be, const float*, const float*, const float* dy, float* dx, int n) override {
    if (!dx) return;
    if (!train_ || p_ == 0.f)
      be.copy(dx, dy, sizeof(float) * size_ * n);
    else
      be.dropout_backward(size_ * n, p_, dy, mask_, dx);
  }

 private:
  float p_;
  size_t size_ = 0;
  bool train_ = true;
  BatchContext ctx_;
  Backend* be_ = nullptr;
  uint8_t* mask_ = nullptr;
  int64_t* iota_ = nullptr;
};

class AvgPool : public Layer {
 public:
  AvgPool(const std::string& name, int k, int stride, int pad, bool global) : Layer(name), global_(global) {
    d_.r = d_.s = k;
    d_.stride = stride;
    d_.pad = pad;
  }
  std::string describe() const override {
    if (global_) return "global avgpool";
    return strprintf("avgpool %dx%d stride %d pad %d", d_.r, d_.s, d_.stride, d_.pad);
  }
  Dims setup(const Dims& in) override {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    if (global_) {
      d_.r = in.h;
      d_.s = in.w;
      d_.stride = 1;
      d_.pad = 0;
    }
    if (in.h + 2 * d_.pad < d_.r || in.w + 2 * d_.pad < d_.s || d_.pad * 2 > d_.r)
      raise(kExitUsage, "layer %s: a %dx%d pooling window (padding %d) does not fit a %dx%d input", name_.c_str(),
            d_.r, d_.s, d_.pad, in.h, in.w);
    return {d_.p(), d_.q(), in.c};
  }
  void forward(Backend& be, const float* x, float* y, int n, bool) override {
    d_.n = n;
    be.avgpool_forward(d_, x, y);
  }
  void backward(Backend& be, const float*, const float*, const float* dy, float* dx, int n) override {
    d_.n = n;
    if (dx) be.avgpool_backward(d_, dy, dx);
  }

 private:
  bool global_;
  PoolDesc d_;
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm(const std::string& name, const BnOptions& opt) {
  return std::make_unique<BatchNorm>(name, opt);
}
std::unique_ptr<Layer> make_dropout(const std::string& name, float p) { return std::make_unique<Dropout>(name, p); }
std::unique_ptr<Layer> make_avgpool(const std::string& name, int kernel, int stride, int pad) {
  return std::make_unique<AvgPool>(name, kernel, stride, pad, false);
}
std::unique_ptr<Layer> make_global_avgpool(const std::string& name) {
  return std::make_unique<AvgPool>(name, 1, 1, 0, true);
}

}  // namespace cnn
