// Convolution and fully connected layers (weights He-normal, optional bias).
#include "src/base/error.h"
#include "src/model/layers.h"
#include "src/model/onnx/onnx_export.h"

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
    const bool xb = d_.x_layout == ActLayout::kNChw16c, yb = d_.y_layout == ActLayout::kNChw16c;
    if (xb || yb) extra += strprintf(" (nChw16c %s)", xb && yb ? "in and out" : xb ? "in" : "out");
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
    if (add_dx_ && dx) {
      be.conv2d_backward_filter(dt_, d_, x, dy, dw_, db_);
      be.conv2d_backward_data_add(dt_, d_, dy, wc_, dx);
      return;
    }
    be.conv2d_backward(dt_, d_, x, dy, wc_, dw_, db_, dx);
  }
  bool set_add_input_grad(Backend& be, int n, bool add) override {
    ConvDesc d = d_;
    d.n = n;
    add_dx_ = add && be.conv2d_backward_data_adds(dt_, d);
    return add_dx_;
  }
  double flops_per_sample() const override {
    return 2.0 * d_.p() * d_.q() * k_ * d_.r * d_.s * (d_.c / d_.groups);
  }
  // nChw16c where the backend's kernels for this shape work in it (Backend::blocked_conv_ok).
  bool can_use_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) const override {
    if (in == ActLayout::kNHWC && out == ActLayout::kNHWC) return true;
    ConvDesc d = d_;
    d.n = max_n;
    return be.blocked_conv_ok(dt_, d);
  }
  void set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) override {
    Layer::set_layouts(be, max_n, in, out);
    d_.x_layout = in;
    d_.y_layout = out;
  }
  // Filters KRSC -> OIHW; ONNX pads are [top, left, bottom, right].
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    const int c = d_.c / d_.groups, r = d_.r, s = d_.s;
    std::vector<float> oihw(static_cast<size_t>(k_) * c * r * s);
    for (int o = 0; o < k_; ++o)
      for (int y = 0; y < r; ++y)
        for (int z = 0; z < s; ++z)
          for (int i = 0; i < c; ++i)
            oihw[((static_cast<size_t>(o) * c + i) * r + y) * s + z] =
                w.params[0].data[((static_cast<size_t>(o) * r + y) * s + z) * c + i];
    b.initializer(w.params[0].name, {k_, c, r, s}, std::move(oihw));
    std::vector<std::string> inputs{b.map(in[0], name_), w.params[0].name};
    if (o_.bias) {
      b.initializer(w.params[1].name, {k_}, std::vector<float>(w.params[1].data, w.params[1].data + k_));
      inputs.push_back(w.params[1].name);
    }
    const std::map<std::string, OnnxAttr> attrs = {
        {"kernel_shape", OnnxBuilder::attr(std::vector<int64_t>{r, s})},
        {"strides", OnnxBuilder::attr(std::vector<int64_t>{d_.stride_h, d_.stride_w})},
        {"pads", OnnxBuilder::attr(std::vector<int64_t>{d_.pad_h, d_.pad_w, d_.pad_h + d_.extra_pad_h,
                                                        d_.pad_w + d_.extra_pad_w})},
        {"dilations", OnnxBuilder::attr(std::vector<int64_t>{d_.dilation_h, d_.dilation_w})},
        {"group", OnnxBuilder::attr(int64_t{d_.groups})}};
    return {b.node("Conv", name_, inputs, attrs), Dims{d_.p(), d_.q(), k_}, false};
  }

 private:
  int k_;
  ConvOptions o_;
  bool add_dx_ = false;  // set_add_input_grad
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
  // Gemm with transB. cnntrain's columns follow its input's (h,w,c) memory order, ONNX's flattening (c,h,w).
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    const Dims& d = in[0].dims;
    std::vector<float> v(static_cast<size_t>(out_) * in_);
    for (int o = 0; o < out_; ++o)
      for (int y = 0; y < d.h; ++y)
        for (int z = 0; z < d.w; ++z)
          for (int c = 0; c < d.c; ++c)
            v[static_cast<size_t>(o) * in_ + (static_cast<size_t>(c) * d.h + y) * d.w + z] =
                w.params[0].data[static_cast<size_t>(o) * in_ + (static_cast<size_t>(y) * d.w + z) * d.c + c];
    b.initializer(w.params[0].name, {out_, in_}, std::move(v));
    std::vector<std::string> inputs{b.flat(in[0], name_), w.params[0].name};
    if (bias_) {
      b.initializer(w.params[1].name, {out_}, std::vector<float>(w.params[1].data, w.params[1].data + out_));
      inputs.push_back(w.params[1].name);
    }
    return {b.node("Gemm", name_, inputs, {{"transB", OnnxBuilder::attr(int64_t{1})}}), Dims{1, 1, out_}, true};
  }

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
