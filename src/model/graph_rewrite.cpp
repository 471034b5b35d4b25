#include "src/model/graph_rewrite.h"

#include <memory>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/model/onnx/onnx_export.h"

namespace cnn {

namespace {

// relu(bn(x) + z) as a graph node reading x and z: the zoo's fused residual join (BatchNormJoin) for a graph.
// Parameters and buffers are the batch norm's, under its name.
class JoinNode : public MultiInputLayer {
 public:
  explicit JoinNode(std::unique_ptr<BatchNormJoin> bn) : MultiInputLayer(bn->name()), bn_(std::move(bn)) {}
  std::string describe() const override { return bn_->describe() + " + add + relu"; }
  Dims setup_inputs(const std::vector<Dims>& in) override {
    CNN_CHECK(in.size() == 2, "join %s has %zu inputs", name_.c_str(), in.size());
    const Dims &x = in[0], &z = in[1];
    if (!(x == z))
      raise(kExitUsage, "layer '%s' (batch norm + add) joins inputs of different shapes, %dx%dx%d and %dx%dx%d: "
            "add needs equal shapes", name_.c_str(), x.h, x.w, x.c, z.h, z.w, z.c);
    return bn_->setup(x);
  }
  std::vector<ParamSpec> param_specs() const override { return bn_->param_specs(); }
  std::vector<ParamSpec> buffer_specs() const override { return bn_->buffer_specs(); }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override { bn_->bind(p, g); }
  void bind_copy(const std::vector<const void*>& p) override { bn_->bind_copy(p); }
  void bind_buffers(const std::vector<float*>& b) override { bn_->bind_buffers(b); }
  void set_dtype(DType t) override {
    Layer::set_dtype(t);
    bn_->set_dtype(t);
  }
  void set_batch(const BatchContext& ctx) override { bn_->set_batch(ctx); }
  void allocate(Backend& be, int max_n) override { bn_->allocate(be, max_n); }
  size_t bytes_per_sample() const override { return bn_->bytes_per_sample(); }
  double flops_per_sample() const override { return bn_->flops_per_sample(); }
  void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool train) override {
    bn_->forward_join(be, xs[0], xs[1], y, n, train);
  }
  void backward_inputs(Backend& be, const std::vector<const void*>& xs, const void* y, const void* dy,
                       const std::vector<void*>& dxs, int n) override {
    bn_->backward_join(be, xs[0], y, dy, dxs[0], dxs[1], n);
  }
  // The nodes it replaced: BatchNormalization of x, Add of z, Relu (as a residual block exports its join).
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    const OnnxValue y = bn_->export_onnx(b, {in[0]}, w);
    const std::string sum = b.node("Add", name_ + "/add", {y.name, b.map(in[1], name_ + "/shortcut")});
    return {b.node("Relu", name_ + "/relu", {sum}), y.dims, false};
  }

 private:
  std::unique_ptr<BatchNormJoin> bn_;
};

class Rewriter {
 public:
  Rewriter(std::vector<std::unique_ptr<Layer>>& layers, std::vector<std::vector<int>>& inputs)
      : layers_(layers), inputs_(inputs), replaced_by_(layers.size()) {
    for (size_t i = 0; i < layers.size(); ++i) replaced_by_[i] = static_cast<int>(i);
  }

  FusionCount run() {
    FusionCount c;
    // Joins first: their batch norm must still be plain (a join's ReLU is never also a batch norm's).
    for (size_t i = 0; i < layers_.size(); ++i) c.residual_join += fuse_join(static_cast<int>(i));
    for (size_t i = 0; i < layers_.size(); ++i) c.bn_relu += fuse_bn_relu(static_cast<int>(i));
    for (size_t i = 0; i < layers_.size(); ++i) c.bn_capped_relu += fuse_bn_capped_relu(static_cast<int>(i));
    compact();
    return c;
  }

 private:
  bool live(int i) const { return replaced_by_[i] == i; }
  // The one layer reading layer j's output, through one input slot; -1 if none or several (or the net's
  // output: the last layer has no reader).
  int sole_reader(int j) const {
    int reader = -1, slots = 0;
    for (size_t i = j + 1; i < layers_.size(); ++i) {
      if (!live(static_cast<int>(i))) continue;
      for (int k : inputs_[i])
        if (k == j) {
          reader = static_cast<int>(i);
          ++slots;
        }
    }
    return slots == 1 ? reader : -1;
  }
  // A ReLU reading j alone that is not the net's output (that must stay the last layer).
  int relu_after(int j) const {
    const int r = sole_reader(j);
    return r >= 0 && r + 1 < static_cast<int>(layers_.size()) && is_relu(*layers_[r]) ? r : -1;
  }
  // Readers of `from` read `to` instead; `from` goes.
  void forward_readers(int from, int to) {
    for (auto& in : inputs_)
      for (int& k : in)
        if (k == from) k = to;
    replaced_by_[from] = to;
  }

  // A capped ReLU (ReLU6: Clip(0, 6)) reading j alone, not the net's output.
  int capped_relu_after(int j, float* cap) const {
    const int r = sole_reader(j);
    return r >= 0 && r + 1 < static_cast<int>(layers_.size()) && is_capped_relu(*layers_[r], cap) ? r : -1;
  }

  int fuse_bn_relu(int b) {
    const BnOptions* o = live(b) ? plain_batchnorm_options(*layers_[b]) : nullptr;
    const int r = o ? relu_after(b) : -1;
    if (r < 0) return 0;
    layers_[b] = make_batchnorm(layers_[b]->name(), *o, true);
    forward_readers(r, b);
    return 1;
  }

  int fuse_bn_capped_relu(int b) {
    const BnOptions* o = live(b) ? plain_batchnorm_options(*layers_[b]) : nullptr;
    float cap = 0.f;
    const int r = o ? capped_relu_after(b, &cap) : -1;
    if (r < 0) return 0;
    layers_[b] = make_batchnorm(layers_[b]->name(), *o, BnAct::relu_capped(cap));
    forward_readers(r, b);
    return 1;
  }

  // add(bn(x), z) -> relu, in either input order; of two batch-norm inputs the later one fuses (the one
  // whose place the other input's producer precedes).
  int fuse_join(int a) {
    if (!live(a) || !is_add(*layers_[a]) || inputs_[a].size() != 2) return 0;
    const int r = relu_after(a);
    if (r < 0) return 0;
    const int first = inputs_[a][0] > inputs_[a][1] ? 0 : 1;
    for (int k : {first, 1 - first}) {
      const int b = inputs_[a][k], z = inputs_[a][1 - k];
      const BnOptions* o = b >= 0 && z < b ? plain_batchnorm_options(*layers_[b]) : nullptr;
      if (!o || sole_reader(b) != a) continue;
      layers_[b] = std::make_unique<JoinNode>(make_batchnorm_join(layers_[b]->name(), *o));
      inputs_[b].push_back(z);
      replaced_by_[a] = b;
      forward_readers(r, b);
      return 1;
    }
    return 0;
  }

  // Drops the replaced layers and renumbers the inputs.
  void compact() {
    std::vector<int> index(layers_.size(), -1);
    std::vector<std::unique_ptr<Layer>> layers;
    std::vector<std::vector<int>> inputs;
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (!live(static_cast<int>(i))) continue;
      index[i] = static_cast<int>(layers.size());
      layers.push_back(std::move(layers_[i]));
      inputs.push_back(inputs_[i]);
    }
    for (auto& in : inputs)
      for (int& k : in)
        if (k >= 0) k = index[k];
    layers_ = std::move(layers);
    inputs_ = std::move(inputs);
  }

  std::vector<std::unique_ptr<Layer>>& layers_;
  std::vector<std::vector<int>>& inputs_;
  std::vector<int> replaced_by_;  // i for a live layer, else the layer whose output stands for its output
};

}  // namespace

FusionCount fuse_graph(Net& net) {
  FusionCount c;
  net.edit_graph([&](std::vector<std::unique_ptr<Layer>>& layers, std::vector<std::vector<int>>& inputs) {
    c = Rewriter(layers, inputs).run();
  });
  return c;
}

}  // namespace cnn
