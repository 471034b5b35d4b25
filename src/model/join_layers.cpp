// Layers that join the branches of a graph (Net::add with several inputs): Add (also with stochastic depth), Mul,
// Concat; and the parameterised activations imported graphs use.
#include <cmath>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/model/layers.h"
#include "src/model/onnx/onnx_export.h"

namespace cnn {

namespace {

// The inputs of an element-wise join as ONNX names: as they are when all are flattened alike, else as maps.
std::vector<std::string> join_inputs(OnnxBuilder& b, const std::vector<OnnxValue>& in, const std::string& name) {
  bool flat = true;
  for (const OnnxValue& v : in) flat = flat && v.flat && v.dims == in[0].dims;
  std::vector<std::string> names;
  for (size_t k = 0; k < in.size(); ++k)
    names.push_back(flat ? in[k].name : b.map(in[k], name + "/" + std::to_string(k)));
  return names;
}

// A chain of binary Adds, in input order as Add's forward sums.
OnnxValue export_add(OnnxBuilder& b, const std::vector<OnnxValue>& in, const std::string& name) {
  const std::vector<std::string> xs = join_inputs(b, in, name);
  std::string y = xs[0];
  for (size_t k = 1; k < xs.size(); ++k)
    y = b.node("Add", k + 1 == xs.size() ? name : name + "/" + std::to_string(k), {y, xs[k]});
  const bool flat = xs[0] == in[0].name && in[0].flat;
  return {y, in[0].dims, flat};
}

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
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    return export_add(b, in, name_);
  }

 private:
  size_t size_ = 0;
};

// Stochastic depth's per-sample scales s[i] = keep_i / (1 - p) are inverted dropout of a vector of ones, one
// element per sample (torchvision's bernoulli(1 - p) / (1 - p) noise, in the activation type as torchvision's); the
// branch is scaled by them as the backend's mul of [n, size, 1] by [n, 1], so every backend draws and scales alike.
class StochasticDepthAdd : public MultiInputLayer {
 public:
  StochasticDepthAdd(const std::string& name, float p) : MultiInputLayer(name), p_(p) {
    if (!(p >= 0.f && p < 1.f))
      raise(kExitUsage, "layer %s: stochastic depth probability %g must be in [0, 1)", name.c_str(), p);
  }
  ~StochasticDepthAdd() override {
    if (!be_) return;
    for (void* d : {ones_, scale_, static_cast<void*>(mask_), static_cast<void*>(ids_)}) be_->release(d);
  }
  std::string describe() const override { return strprintf("add, stochastic depth p=%g", p_); }
  Dims setup_inputs(const std::vector<Dims>& in) override {
    if (in.size() != 2 || !(in[0] == in[1]))
      raise(kExitUsage, "layer '%s' (add with stochastic depth) needs two inputs of one shape, the shortcut and the "
            "branch of a residual block", name_.c_str());
    size_ = in[0].size();
    return in[0];
  }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    ones_ = alloc_per_sample(be, act_size(), max_n);
    scale_ = alloc_per_sample(be, act_size(), max_n);
    mask_ = static_cast<uint8_t*>(alloc_per_sample(be, 1, max_n));
    ids_ = upload_default_ids(be, max_n);
    const std::vector<float> one(max_n, 1.f);
    void* staged = be.alloc(sizeof(float) * max_n);
    be.upload(staged, one.data(), sizeof(float) * max_n);
    be.convert(max_n, DType::kF32, staged, dt_, ones_);
    be.release(staged);
  }
  void set_batch(const BatchContext& ctx) override { ctx_ = ctx; }
  // xs: {shortcut, branch}. Rounded as torchvision's branch * noise, then += shortcut.
  void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool train) override {
    scaled_ = train && p_ > 0.f;
    if (!scaled_) {
      be.copy(y, xs[0], act_size() * size_ * n);
      be.axpy(dt_, size_ * n, 1.f, xs[1], y);
      return;
    }
    be.dropout_forward(dt_, n, 1, ones_, p_, batch_draw_key(ctx_, kStochasticDepthStream, name_),
                       ctx_.ids ? ctx_.ids : ids_, scale_, mask_);
    be.mul_forward(dt_, n, static_cast<int>(size_), 1, xs[1], scale_, y);
    be.axpy(dt_, size_ * n, 1.f, xs[0], y);
  }
  void backward_inputs(Backend& be, const std::vector<const void*>&, const void*, const void* dy,
                       const std::vector<void*>& dxs, int n) override {
    if (dxs[0]) be.copy(dxs[0], dy, act_size() * size_ * n);
    if (!dxs[1]) return;
    if (scaled_)
      be.mul_backward(dt_, n, static_cast<int>(size_), 1, nullptr, scale_, dy, dxs[1], nullptr, false);
    else
      be.copy(dxs[1], dy, act_size() * size_ * n);
  }
  double flops_per_sample() const override { return static_cast<double>(size_); }
  // The identity at inference: the add alone.
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    return export_add(b, in, name_);
  }

 private:
  float p_;
  size_t size_ = 0;
  bool scaled_ = false;  // the last forward drew scales (training, p > 0)
  BatchContext ctx_;
  Backend* be_ = nullptr;
  void* ones_ = nullptr;   // [max_n] of the activation type
  void* scale_ = nullptr;  // [max_n] s of the last training forward, of the activation type
  uint8_t* mask_ = nullptr;
  int64_t* ids_ = nullptr;
};

std::string shape(const Dims& d) { return strprintf("%dx%dx%d", d.h, d.w, d.c); }

// Equal shapes (rows of C), or [1,1,C] scaling [H,W,C]: the backend's mul of x [n, hw, c] by s [n, c].
class Mul : public MultiInputLayer {
 public:
  using MultiInputLayer::MultiInputLayer;
  std::string describe() const override { return hw_ > 1 ? "mul (per-channel scale)" : "mul"; }
  Dims setup_inputs(const std::vector<Dims>& in) override {
    if (in.size() != 2) raise(kExitUsage, "layer '%s' (mul) needs two inputs, not %zu", name_.c_str(), in.size());
    const Dims& a = in[0];
    const Dims& b = in[1];
    const Dims one_a{1, 1, a.c}, one_b{1, 1, b.c};
    if (a == b) {
      big_ = 0;
      hw_ = 1;
      c_ = a.c;
      rows_ = a.h * a.w;
      return a;
    }
    if (a.c == b.c && (b == one_b || a == one_a)) {
      big_ = b == one_b ? 0 : 1;
      const Dims& x = in[big_];
      hw_ = x.h * x.w;
      c_ = x.c;
      rows_ = 1;
      return x;
    }
    raise(kExitUsage, "layer '%s' (mul) multiplies %s by %s (HxWxC): cnntrain multiplies equal shapes or scales "
          "each channel by a 1x1xC tensor", name_.c_str(), shape(a).c_str(), shape(b).c_str());
  }
  void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool) override {
    be.mul_forward(dt_, n * rows_, hw_, c_, xs[big_], xs[1 - big_], y);
  }
  void backward_inputs(Backend& be, const std::vector<const void*>& xs, const void*, const void* dy,
                       const std::vector<void*>& dxs, int n) override {
    be.mul_backward(dt_, n * rows_, hw_, c_, xs[big_], xs[1 - big_], dy, dxs[big_], dxs[1 - big_], false);
  }
  double flops_per_sample() const override { return static_cast<double>(rows_) * hw_ * c_; }
  // ONNX's broadcasting scales [N,C,H,W] by [N,C,1,1].
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    const std::vector<std::string> xs = join_inputs(b, in, name_);
    const bool flat = xs[0] == in[0].name && in[0].flat;
    return {b.node("Mul", name_, xs), in[big_].dims, flat};
  }

 private:
  int big_ = 0, hw_ = 1, c_ = 1, rows_ = 1;  // big_: the input of the output's shape
};

class Concat : public MultiInputLayer {
 public:
  using MultiInputLayer::MultiInputLayer;
  std::string describe() const override { return strprintf("concat of %zu", channels_.size()); }
  Dims setup_inputs(const std::vector<Dims>& in) override {
    channels_.clear();
    Dims out{in[0].h, in[0].w, 0};
    for (const Dims& d : in) {
      if (d.h != out.h || d.w != out.w)
        raise(kExitUsage, "layer '%s' (concat) joins %s and %s (HxWxC): the inputs of a channel concatenation "
              "need the same height and width", name_.c_str(), shape(in[0]).c_str(), shape(d).c_str());
      channels_.push_back(d.c);
      out.c += d.c;
    }
    pixels_ = out.h * out.w;
    return out;
  }
  void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool) override {
    be.concat_forward(dt_, n * pixels_, static_cast<int>(xs.size()), channels_.data(), xs.data(), y);
  }
  void backward_inputs(Backend& be, const std::vector<const void*>&, const void*, const void* dy,
                       const std::vector<void*>& dxs, int n) override {
    be.concat_backward(dt_, n * pixels_, static_cast<int>(dxs.size()), channels_.data(), dy, dxs.data(), false);
  }
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    std::vector<std::string> xs;
    int c = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      xs.push_back(b.map(in[k], name_ + "/" + std::to_string(k)));
      c += in[k].dims.c;
    }
    return {b.node("Concat", name_, xs, {{"axis", OnnxBuilder::attr(int64_t{1})}}), Dims{in[0].dims.h, in[0].dims.w, c},
            false};
  }

 private:
  std::vector<int> channels_;
  int pixels_ = 0;
};

class ActivationLayer : public Layer {
 public:
  ActivationLayer(std::string name, const Activation& a) : Layer(std::move(name)), a_(a) {}
  const Activation& activation() const { return a_; }
  // min(max(x, 0), cap) with 0 < cap < inf: a batch norm's fusable epilogue (BnAct::relu_capped).
  bool is_capped_relu() const {
    return a_.kind == ActKind::kClip && a_.alpha == 0.f && a_.beta > 0.f && std::isfinite(a_.beta);
  }
  std::string describe() const override {
    static const char* names[] = {"leaky relu", "clip", "sigmoid", "hard sigmoid", "hard swish", "silu"};
    return strprintf("%s (%g, %g)", names[static_cast<int>(a_.kind)], a_.alpha, a_.beta);
  }
  Dims setup(const Dims& in) override {
    size_ = in.size();
    return in;
  }
  void forward(Backend& be, const void* x, void* y, int n, bool) override {
    be.activation_forward(dt_, a_, size_ * n, x, y);
  }
  void backward(Backend& be, const void* x, const void*, const void* dy, void* dx, int n) override {
    if (dx) be.activation_backward(dt_, a_, size_ * n, x, dy, dx, false);
  }
  // SiLU (no ONNX op before opset 24) as x * Sigmoid(x).
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    const std::string& x = in[0].name;
    std::string y;
    switch (a_.kind) {
      case ActKind::kLeakyRelu: y = b.node("LeakyRelu", name_, {x}, {{"alpha", OnnxBuilder::attr(a_.alpha)}}); break;
      case ActKind::kClip:
        y = b.node("Clip", name_, {x, b.scalar(name_ + "/min", a_.alpha), b.scalar(name_ + "/max", a_.beta)});
        break;
      case ActKind::kSigmoid: y = b.node("Sigmoid", name_, {x}); break;
      case ActKind::kHardSigmoid:
        y = b.node("HardSigmoid", name_, {x},
                   {{"alpha", OnnxBuilder::attr(a_.alpha)}, {"beta", OnnxBuilder::attr(a_.beta)}});
        break;
      case ActKind::kHardSwish: y = b.node("HardSwish", name_, {x}); break;
      case ActKind::kSilu: y = b.node("Mul", name_, {x, b.node("Sigmoid", name_ + "/sigmoid", {x})}); break;
    }
    return {y, in[0].dims, in[0].flat};
  }

 private:
  Activation a_;
  size_t size_ = 0;
};

}  // namespace

std::unique_ptr<MultiInputLayer> make_mul(const std::string& name) { return std::make_unique<Mul>(name); }
std::unique_ptr<MultiInputLayer> make_concat(const std::string& name) { return std::make_unique<Concat>(name); }
std::unique_ptr<Layer> make_activation(const std::string& name, const Activation& a) {
  return std::make_unique<ActivationLayer>(name, a);
}

std::unique_ptr<MultiInputLayer> make_add(const std::string& name) { return std::make_unique<Add>(name); }
std::unique_ptr<MultiInputLayer> make_stochastic_depth_add(const std::string& name, float p) {
  return std::make_unique<StochasticDepthAdd>(name, p);
}
bool is_add(const Layer& l) { return dynamic_cast<const Add*>(&l) != nullptr; }
bool is_capped_relu(const Layer& l, float* cap) {
  const auto* a = dynamic_cast<const ActivationLayer*>(&l);
  if (!a || !a->is_capped_relu()) return false;
  *cap = a->activation().beta;
  return true;
}

}  // namespace cnn
