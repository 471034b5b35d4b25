#include "src/model/layers.h"

#include "src/base/error.h"

namespace cnn {

namespace {

class Conv2d : public Layer {
 public:
  Conv2d(const std::string& name, int k, const ConvOptions& o) : Layer(name), k_(k), o_(o) {}
  std::string describe() const override {
    return strprintf("conv %dx%d %d->%d stride %d pad %d%s", o_.kernel, o_.kernel, d_.c, k_, o_.stride, o_.pad,
                     o_.bias ? "" : " no-bias");
  }
  Dims setup(const Dims& in) override {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    d_.k = k_;
    d_.r = d_.s = o_.kernel;
    d_.stride_h = d_.stride_w = o_.stride;
    d_.pad_h = d_.pad_w = o_.pad;
    if (in.h + 2 * o_.pad < o_.kernel || in.w + 2 * o_.pad < o_.kernel)
      raise(kExitUsage, "layer %s: a %dx%d kernel does not fit a %dx%d input (padding %d); the model needs larger "
            "images", name_.c_str(), o_.kernel, o_.kernel, in.h, in.w, o_.pad);
    return {d_.p(), d_.q(), k_};
  }
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> v{{"weight", {k_, d_.r, d_.s, d_.c}, Init::kHeNormal, d_.r * d_.s * d_.c, true}};
    if (o_.bias) v.push_back({"bias", {k_}, Init::kZero, 1, false});
    return v;
  }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    w_ = p[0];
    dw_ = g[0];
    b_ = o_.bias ? p[1] : nullptr;
    db_ = o_.bias ? g[1] : nullptr;
  }
  void forward(Backend& be, const float* x, float* y, int n, bool) override {
    d_.n = n;
    be.conv2d_forward(d_, x, w_, b_, y);
  }
  void backward(Backend& be, const float* x, const float*, const float* dy, float* dx, int n) override {
    d_.n = n;
    be.conv2d_backward_filter(d_, x, dy, dw_, db_);
    if (dx) be.conv2d_backward_data(d_, dy, w_, dx);
  }
  double flops_per_sample() const override { return 2.0 * d_.p() * d_.q() * k_ * d_.r * d_.s * d_.c; }

 private:
  int k_;
  ConvOptions o_;
  ConvDesc d_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

class Linear : public Layer {
 public:
  Linear(const std::string& name, int out, bool bias) : Layer(name), out_(out), bias_(bias) {}
  std::string describe() const override { return strprintf("linear %d->%d%s", in_, out_, bias_ ? "" : " no-bias"); }
  Dims setup(const Dims& in) override {
    in_ = static_cast<int>(in.size());
    return {1, 1, out_};
  }
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> v{{"weight", {out_, in_}, Init::kHeNormal, in_, true}};
    if (bias_) v.push_back({"bias", {out_}, Init::kZero, 1, false});
    return v;
  }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    w_ = p[0];
    dw_ = g[0];
    b_ = bias_ ? p[1] : nullptr;
    db_ = bias_ ? g[1] : nullptr;
  }
  void forward(Backend& be, const float* x, float* y, int n, bool) override {
    be.linear_forward(n, in_, out_, x, w_, b_, y);
  }
  void backward(Backend& be, const float* x, const float*, const float* dy, float* dx, int n) override {
    be.linear_backward_weight(n, in_, out_, x, dy, dw_, db_);
    if (dx) be.linear_backward_data(n, in_, out_, dy, w_, dx);
  }
  double flops_per_sample() const override { return 2.0 * in_ * out_; }

 private:
  int in_ = 0, out_;
  bool bias_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

class Relu : public Layer {
 public:
  using Layer::Layer;
  std::string describe() const override { return "relu"; }
  Dims setup(const Dims& in) override {
    size_ = in.size();
    return in;
  }
  void forward(Backend& be, const float* x, float* y, int n, bool) override { be.relu_forward(size_ * n, x, y); }
  void backward(Backend& be, const float*, const float* y, const float* dy, float* dx, int n) override {
    if (dx) be.relu_backward(size_ * n, y, dy, dx);
  }

 private:
  size_t size_ = 0;
};

class MaxPool : public Layer {
 public:
  MaxPool(const std::string& name, int k, int stride, int pad) : Layer(name) {
    d_.r = d_.s = k;
    d_.stride = stride;
    d_.pad = pad;
  }
  ~MaxPool() override {
    if (be_) be_->release(argmax_);
  }
  std::string describe() const override {
    return strprintf("maxpool %dx%d stride %d pad %d", d_.r, d_.s, d_.stride, d_.pad);
  }
  Dims setup(const Dims& in) override {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    if (in.h + 2 * d_.pad < d_.r || in.w + 2 * d_.pad < d_.s || d_.pad * 2 > d_.r)
      raise(kExitUsage, "layer %s: a %dx%d pooling window (padding %d) does not fit a %dx%d input", name_.c_str(),
            d_.r, d_.s, d_.pad, in.h, in.w);
    return {d_.p(), d_.q(), in.c};
  }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    argmax_ = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * max_n * d_.p() * d_.q() * d_.c));
  }
  void forward(Backend& be, const float* x, float* y, int n, bool) override {
    d_.n = n;
    be.maxpool_forward(d_, x, y, argmax_);
  }
  void backward(Backend& be, const float*, const float*, const float* dy, float* dx, int n) override {
    d_.n = n;
    if (dx) be.maxpool_backward(d_, dy, argmax_, dx);
  }

 private:
  PoolDesc d_;
  Backend* be_ = nullptr;
  int32_t* argmax_ = nullptr;
};

class Flatten : public Layer {
 public:
  using Layer::Layer;
  std::string describe() const override { return "flatten"; }
  Dims setup(const Dims& in) override { return {1, 1, static_cast<int>(in.size())}; }
  bool is_view() const override { return true; }
  void forward(Backend&, const float*, float*, int, bool) override {}
  void backward(Backend&, const float*, const float*, const float*, float*, int) override {}
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const std::string& name, int out_channels, const ConvOptions& opt) {
  return std::make_unique<Conv2d>(name, out_channels, opt);
}
std::unique_ptr<Layer> make_linear(const std::string& name, int out_features, bool bias) {
  return std::make_unique<Linear>(name, out_features, bias);
}
std::unique_ptr<Layer> make_relu(const std::string& name) { return std::make_unique<Relu>(name); }
std::unique_ptr<Layer> make_maxpool(const std::string& name, int kernel, int stride, int pad) {
  return std::make_unique<MaxPool>(name, kernel, stride, pad);
}
std::unique_ptr<Layer> make_flatten(const std::string& name) { return std::make_unique<Flatten>(name); }

}  // namespace cnn
