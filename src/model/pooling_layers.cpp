// Max, average and global average pooling.
#include "src/base/error.h"
#include "src/model/layers.h"

namespace cnn {

namespace {

// Padding wider than half the window would make windows that hold only padding.
void check_window(const std::string& layer, const PoolDesc& d, const Dims& in) {
  if (in.h + 2 * d.pad < d.r || in.w + 2 * d.pad < d.s || d.pad * 2 > d.r)
    raise(kExitUsage, "layer %s: a %dx%d pooling window (padding %d) does not fit a %dx%d input", layer.c_str(),
          d.r, d.s, d.pad, in.h, in.w);
}

class MaxPool : public Layer {
 public:
  MaxPool(const std::string& name, int k, int stride, int pad, bool relu) : Layer(name), relu_(relu) {
    d_.r = d_.s = k;
    d_.stride = stride;
    d_.pad = pad;
  }
  ~MaxPool() override {
    if (be_) be_->release(argmax_);
  }
  std::string describe() const override {
    return strprintf("%smaxpool %dx%d stride %d pad %d", relu_ ? "relu + " : "", d_.r, d_.s, d_.stride, d_.pad);
  }
  Dims setup(const Dims& in) override {
    d_.h = in.h;
    d_.w = in.w;
    d_.c = in.c;
    check_window(name_, d_, in);
    return {d_.p(), d_.q(), in.c};
  }
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

 private:
  bool relu_;
  PoolDesc d_;
  Backend* be_ = nullptr;
  int32_t* argmax_ = nullptr;
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
    check_window(name_, d_, in);
    return {d_.p(), d_.q(), in.c};
  }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    d_.n = n;
    be.avgpool_forward(dt_, d_, x, y);
  }
  void backward(Backend& be, const void*, const void*, const void* dy, void* dx, int n) override {
    d_.n = n;
    if (dx) be.avgpool_backward(dt_, d_, dy, dx);
  }

 private:
  bool global_;
  PoolDesc d_;
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
