// Layers that join the branches of a graph (Net::add with several inputs): Add.
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/model/layers.h"

namespace cnn {

namespace {

class Add : public MultiInputLayer {
 public:
  using MultiInputLayer::MultiInputLayer;
  std::string describe() const override { return "add"; }
  Dims setup_inputs(const std::vector<Dims>& in) override {
    for (const Dims& d : in)
      if (!(d == in[0]))
        raise(kExitUsage, "layer '%s' (add) joins inputs of different shapes, %dx%dx%d and %dx%dx%d: add needs "
              "equal shapes", name_.c_str(), in[0].h, in[0].w, in[0].c, d.h, d.w, d.c);
    size_ = in[0].size();
    return in[0];
  }
  // In the activation type, in input order: (x1 + x2) + x3 ..., each sum rounded as PyTorch's chain of adds.
  void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool) override {
    be.copy(y, xs[0], act_size() * size_ * n);
    for (size_t k = 1; k < xs.size(); ++k) be.axpy(dt_, size_ * n, 1.f, xs[k], y);
  }
  void backward_inputs(Backend& be, const std::vector<const void*>&, const void*, const void* dy,
                       const std::vector<void*>& dxs, int n) override {
    for (void* dx : dxs)
      if (dx) be.copy(dx, dy, act_size() * size_ * n);
  }
  double flops_per_sample() const override { return static_cast<double>(size_); }

 private:
  size_t size_ = 0;
};

}  // namespace

std::unique_ptr<MultiInputLayer> make_add(const std::string& name) { return std::make_unique<Add>(name); }

}  // namespace cnn
