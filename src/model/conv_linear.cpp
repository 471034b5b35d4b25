// Convolution and fully connected layers (weights He-normal, optional bias).
#include "src/base/error.h"
#include "src/model/layers.h"

namespace cnn {

namespace {

class Conv2d : public Layer {
 public:
  Conv2d(const std::string& name, int k, const ConvOptions& o) : Layer(name), k_(k), o_(o) {}
  std::string describe() const override {
    std::string extra;
    if (o_.groups != 1) extra += strprintf(" groups %d", o_.groups);
    if (o_.dilation != 1) extra += strprintf(" dilation %d", o_.dilation);
    if (o_.extra_pad_h || o_.extra_pad_w) extra += strprintf(" pad-end +%d,+%d", o_.extra_pad_h, o_.extra_pad_w);
    return strprintf("conv %dx%d %d->%d stride %d pad %d%s%s", o_.kernel, o_.kernel, d_.c, k_, o_.stride, o_.pad,
                     extra.c_str(), o_.bias ? "" : " no-bias");
  }
  Dims setup(const Dims& in) override {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    d_.k = k_;
    d_.r = d_.s = o_.kernel;
    d_.stride_h = d_.stride_w = o_.stride;
    d_.pad_h = d_.pad_w = o_.pad;
    d_.groups = o_.groups;
    d_.dilation_h = d_.dilation_w = o_.dilation;
    d_.extra_pad_h = o_.extra_pad_h;
    d_.extra_pad_w = o_.extra_pad_w;
    if (o_.groups < 1 || in.c % o_.groups != 0 || k_ % o_.groups != 0)
      raise(kExitUsage, "layer %s: %d groups do not divide its %d input and %d output channels", name_.c_str(),
            o_.groups, in.c, k_);
    const int span = o_.dilation * (o_.kernel - 1) + 1;  // rows (columns) one output's window covers
    if (in.h + 2 * o_.pad + o_.extra_pad_h < span || in.w + 2 * o_.pad + o_.extra_pad_w < span)
      raise(kExitUsage, "layer %s: a %dx%d kernel (dilation %d) does not fit a %dx%d input (padding %d); the model "
            "needs larger images", name_.c_str(), o_.kernel, o_.kernel, o_.dilation, in.h, in.w, o_.pad);
    return {d_.p(), d_.q(), k_};
  }
  std::vector<ParamSpec> param_specs() const override {
    const int c = d_.c / d_.groups;  // input channels each filter reads
    std::vector<ParamSpec> v{{"weight", {k_, d_.r, d_.s, c}, Init::kHeNormal, d_.r * d_.s * c, true}};
    if (o_.bias) v.push_back({"bias", {k_}, Init::kZero, 1, false});
    return v;
  }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    wc_ = p[0];  // until bind_copy: an fp32 layer reads its weights directly
    dw_ = g[0];
    b_ = o_.bias ? p[1] : nullptr;
    db_ = o_.bias ? g[1] : nullptr;
  }
  void bind_copy(const std::vector<const void*>& p) override { wc_ = p[0]; }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    be.set_label(name_.c_str());
    d_.n = n;
    be.conv2d_forward(dt_, d_, x, wc_, b_, y);
  }
  void backward(Backend& be, const void* x, const void*, const void* dy, void* dx, int n) override {
    be.set_label(name_.c_str());
    d_.n = n;
    be.conv2d_backward_filter(dt_, d_, x, dy, dw_, db_);
    if (dx) be.conv2d_backward_data(dt_, d_, dy, wc_, dx);
  }
  double flops_per_sample() const override {
    return 2.0 * d_.p() * d_.q() * k_ * d_.r * d_.s * (d_.c / d_.groups);
  }

 private:
  int k_;
  ConvOptions o_;
  ConvDesc d_;
  float *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  const void* wc_ = nullptr;  // the filters in the activation type (bind_copy)
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
    wc_ = p[0];  // until bind_copy: an fp32 layer reads its weights directly
    dw_ = g[0];
    b_ = bias_ ? p[1] : nullptr;
    db_ = bias_ ? g[1] : nullptr;
  }
  void bind_copy(const std::vector<const void*>& p) override { wc_ = p[0]; }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    be.set_label(name_.c_str());
    be.linear_forward(dt_, n, in_, out_, x, wc_, b_, y);
  }
  void backward(Backend& be, const void* x, const void*, const void* dy, void* dx, int n) override {
    be.set_label(name_.c_str());
    be.linear_backward_weight(dt_, n, in_, out_, x, dy, dw_, db_);
    if (dx) be.linear_backward_data(dt_, n, in_, out_, dy, wc_, dx);
  }
  double flops_per_sample() const override { return 2.0 * in_ * out_; }

 private:
  int in_ = 0, out_;
  bool bias_;
  float *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  const void* wc_ = nullptr;  // the weights in the activation type (bind_copy)
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const std::string& name, int out_channels, const ConvOptions& opt) {
  return std::make_unique<Conv2d>(name, out_channels, opt);
}
std::unique_ptr<Layer> make_linear(const std::string& name, int out_features, bool bias) {
  return std::make_unique<Linear>(name, out_features, bias);
}

}  // namespace cnn
