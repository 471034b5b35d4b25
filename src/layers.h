// Layers. A layer owns views into the net's flat parameter and gradient buffers (declared through
// param_specs(), bound by bind()) and runs its ops through a Backend. Activations are NHWC.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace cnn {

// Per-sample activation shape.
struct Dims {
  int h = 1, w = 1, c = 1;
  size_t size() const { return static_cast<size_t>(h) * w * c; }
  bool operator==(const Dims& o) const { return h == o.h && w == o.w && c == o.c; }
};

enum class Init { kHeNormal, kZero, kOne };

struct ParamSpec {
  std::string name;        // e.g. "weight"; the net prefixes the layer name
  std::vector<int> shape;  // e.g. {K,R,S,C}
  Init init = Init::kZero;
  int fan_in = 1;
  bool decay = true;       // subject to weight decay (false for biases and norm scales when so configured)
  size_t size() const {
    size_t n = 1;
    for (int d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual std::string describe() const = 0;
  // Fixes the input shape; returns the output shape. Throws cnn::Error(kExitUsage) if the shape cannot work.
  virtual Dims setup(const Dims& in) = 0;
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual void bind(const std::vector<float*>& params, const std::vector<float*>& grads) {}
  // Allocates per-batch scratch for up to max_n samples.
  virtual void allocate(Backend& be, int max_n) {}
  // Output is the input buffer itself (reshapes such as flatten).
  virtual bool is_view() const { return false; }
  virtual void forward(Backend& be, const float* x, float* y, int n, bool train) = 0;
  // Parameter gradients accumulate; dx is overwritten and may be null (nothing needs the input gradient).
  virtual void backward(Backend& be, const float* x, const float* y, const float* dy, float* dx, int n) = 0;
  virtual double flops_per_sample() const { return 0; }  // forward multiply-adds * 2

 protected:
  std::string name_;
};

struct ConvOptions {
  int kernel = 3, stride = 1, pad = 1;
  bool bias = true;
};

std::unique_ptr<Layer> make_conv2d(const std::string& name, int out_channels, const ConvOptions& opt);
std::unique_ptr<Layer> make_linear(const std::string& name, int out_features, bool bias = true);
std::unique_ptr<Layer> make_relu(const std::string& name);
std::unique_ptr<Layer> make_maxpool(const std::string& name, int kernel, int stride, int pad = 0);
std::unique_ptr<Layer> make_flatten(const std::string& name);

}  // namespace cnn
