// Max, average and global average pooling.
#include "src/base/error.h"
#include "src/model/layers.h"
#include "src/model/onnx/onnx_export.h"

namespace cnn {

namespace {

// A k x k window with stride and padding, fitted to the input at setup.
class PoolLayer : public Layer {
 public:
  PoolLayer(const std::string& name, int k, int stride, int pad) : Layer(name) {
    d_.r = d_.s = k;
    d_.stride = stride;
    d_.pad = pad;
  }

 protected:
  // The output shape over `in`. Padding wider than half the window would make windows that hold only padding.
  Dims fit(const Dims& in) {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    if (in.h + 2 * d_.pad < d_.r || in.w + 2 * d_.pad < d_.s || d_.pad * 2 > d_.r)
      raise(kExitUsage, "layer %s: a %dx%d pooling window (padding %d) does not fit a %dx%d input", name_.c_str(),
            d_.r, d_.s, d_.pad, in.h, in.w);
    return {d_.p(), d_.q(), in.c};
  }

  // The window attributes of MaxPool and AveragePool (ONNX pads: [top, left, bottom, right]).
  std::map<std::string, OnnxAttr> window() const {
    return {{"kernel_shape", OnnxBuilder::attr(std::vector<int64_t>{d_.r, d_.s})},
            {"strides", OnnxBuilder::attr(std::vector<int64_t>{d_.stride, d_.stride})},
            {"pads", OnnxBuilder::attr(std::vector<int64_t>{d_.pad, d_.pad, d_.pad + d_.extra_pad_h,
                                                            d_.pad + d_.extra_pad_w})}};
  }
  Dims out_dims() const { return {d_.p(), d_.q(), d_.c}; }

  PoolDesc d_;
};

class MaxPool : public PoolLayer {
 public:
  MaxPool(const std::string& name, int k, int stride, int pad, bool relu)
      : PoolLayer(name, k, stride, pad), relu_(relu) {}
  ~MaxPool() override {
    if (be_) be_->release(argmax_);
  }
  std::string describe() const override {
    return strprintf("%smaxpool %dx%d stride %d pad %d", relu_ ? "relu + " : "", d_.r, d_.s, d_.stride, d_.pad);
  }
  Dims setup(const Dims& in) override { return fit(in); }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    argmax_ = static_cast<int32_t*>(alloc_per_sample(be, sizeof(int32_t) * d_.p() * d_.q() * d_.c, max_n));
  }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    d_.n = n;
    be.maxpool_forward(dt_, d_, x, relu_, y, argmax_);
  }
  void backward(Backend& be, const void*, const void* y, const void* dy, void* dx, int n) override {
    d_.n = n;
    if (dx) be.maxpool_backward(dt_, d_, dy, relu_ ? y : nullptr, argmax_, dx);
  }
  // The fused ReLU first (max commutes with it).
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    std::string x = b.map(in[0], name_);
    if (relu_) x = b.node("Relu", name_ + "/relu", {x});
    return {b.node("MaxPool", name_, {x}, window()), out_dims(), false};
  }

 private:
  bool relu_;
  Backend* be_ = nullptr;
  int32_t* argmax_ = nullptr;
};

class AvgPool : public PoolLayer {
 public:
  AvgPool(const std::string& name, int k, int stride, int pad, bool global)
      : PoolLayer(name, k, stride, pad), global_(global) {}
  std::string describe() const override {
    if (global_) return "global avgpool";
    return strprintf("avgpool %dx%d stride %d pad %d", d_.r, d_.s, d_.stride, d_.pad);
  }
  Dims setup(const Dims& in) override {
    if (global_) {
      d_.r = in.h;
      d_.s = in.w;
      d_.stride = 1;
      d_.pad = 0;
    }
    return fit(in);
  }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    d_.n = n;
    be.avgpool_forward(dt_, d_, x, y);
  }
  void backward(Backend& be, const void*, const void*, const void* dy, void* dx, int n) override {
    d_.n = n;
    if (dx) be.avgpool_backward(dt_, d_, dy, dx);
  }
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    const std::string x = b.map(in[0], name_);
    if (global_) return {b.node("GlobalAveragePool", name_, {x}), out_dims(), false};
    auto attrs = window();
    attrs["count_include_pad"] = OnnxBuilder::attr(int64_t{d_.count_include_pad ? 1 : 0});
    return {b.node("AveragePool", name_, {x}, attrs), out_dims(), false};
  }

 private:
  bool global_;
};

}  // namespace

std::unique_ptr<Layer> make_maxpool(const std::string& name, int kernel, int stride, int pad, bool relu_before) {
  return std::make_unique<MaxPool>(name, kernel, stride, pad, relu_before);
}
std::unique_ptr<Layer> make_avgpool(const std::string& name, int kernel, int stride, int pad) {
  return std::make_unique<AvgPool>(name, kernel, stride, pad, false);
}
std::unique_ptr<Layer> make_global_avgpool(const std::string& name) {
  return std::make_unique<AvgPool>(name, 1, 1, 0, true);
}

}  // namespace cnn
