// Per-element and reshaping layers: ReLU, dropout, flatten.
#include <numeric>
#include <vector>

#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/model/layers.h"
#include "src/model/onnx/onnx_export.h"

namespace cnn {

namespace {

class Relu : public Layer {
 public:
  using Layer::Layer;
  std::string describe() const override { return "relu"; }
  Dims setup(const Dims& in) override {
    size_ = in.size();
    return in;
  }
  void forward(Backend& be, const void* x, void* y, int n, bool) override { be.relu_forward(dt_, size_ * n, x, y); }
  void backward(Backend& be, const void*, const void* y, const void* dy, void* dx, int n) override {
    if (dx) be.relu_backward(dt_, size_ * n, y, dy, dx);
  }
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    return {b.node("Relu", name_, {in[0].name}), in[0].dims, in[0].flat};
  }

 private:
  size_t size_ = 0;
};

const uint64_t kDropoutStream = 0x44524f50ull;  // "DROP": keeps masks apart from other RNG uses of the seed

// FNV-1a: a layer's stream must not depend on std::hash, which differs between libraries.
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
    mask_ = static_cast<uint8_t*>(alloc_per_sample(be, size_, max_n));
    iota_ = upload_default_ids(be, max_n);
  }
  void set_batch(const BatchContext& ctx) override { ctx_ = ctx; }
  void forward(Backend& be, const void* x, void* y, int n, bool train) override {
    train_ = train;
    if (!train || p_ == 0.f) {
      be.copy(y, x, act_size() * size_ * n);
      return;
    }
    const uint64_t key = batch_draw_key(ctx_, kDropoutStream, name_);
    be.dropout_forward(dt_, n, size_, x, p_, key, ctx_.ids ? ctx_.ids : iota_, y, mask_);
  }
  void backward(Backend& be, const void*, const void*, const void* dy, void* dx, int n) override {
    if (!dx) return;
    if (!train_ || p_ == 0.f)
      be.copy(dx, dy, act_size() * size_ * n);
    else
      be.dropout_backward(dt_, size_ * n, p_, dy, mask_, dx);
  }
  // The identity at inference: no node.
  OnnxValue export_onnx(OnnxBuilder&, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    return in[0];
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

class Flatten : public Layer {
 public:
  using Layer::Layer;
  std::string describe() const override { return "flatten"; }
  Dims setup(const Dims& in) override { return {1, 1, static_cast<int>(in.size())}; }
  bool is_view() const override { return true; }
  void forward(Backend&, const void*, void*, int, bool) override {}
  void backward(Backend&, const void*, const void*, const void*, void*, int) override {}
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights&) const override {
    return {b.flat(in[0], name_), in[0].dims, true};
  }
};

}  // namespace

uint64_t batch_draw_key(const BatchContext& ctx, uint64_t stream, const std::string& layer) {
  return hash_key(ctx.seed ^ stream, static_cast<uint64_t>(ctx.step), name_hash(layer));
}

int64_t* upload_default_ids(Backend& be, int max_n) {
  std::vector<int64_t> ids(max_n);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  auto* d = static_cast<int64_t*>(be.alloc(sizeof(int64_t) * max_n));
  be.upload(d, ids.data(), sizeof(int64_t) * max_n);
  return d;
}

std::unique_ptr<Layer> make_relu(const std::string& name) { return std::make_unique<Relu>(name); }
bool is_relu(const Layer& l) { return dynamic_cast<const Relu*>(&l) != nullptr; }
std::unique_ptr<Layer> make_flatten(const std::string& name) { return std::make_unique<Flatten>(name); }
std::unique_ptr<Layer> make_dropout(const std::string& name, float p) { return std::make_unique<Dropout>(name, p); }

}  // namespace cnn
