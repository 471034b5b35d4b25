#include "src/model/blocks.h"

#include <algorithm>

#include "src/base/error.h"
#include "src/model/onnx/onnx_export.h"
#include "src/model/scratch.h"

namespace cnn {

namespace {

// What Chain and Residual share: their parameters, buffers and per-sample bytes are their parts' in order
// (spec names prefixed as prefix() says), and the calls that only distribute go to every part.
class Composite : public Layer {
 public:
  using Layer::Layer;
  std::vector<ParamSpec> param_specs() const override { return collect(&Layer::param_specs); }
  std::vector<ParamSpec> buffer_specs() const override { return collect(&Layer::buffer_specs); }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    each_slice(&Layer::param_specs, [&](Layer* l, size_t at, size_t k) {
      l->bind({p.begin() + at, p.begin() + at + k}, {g.begin() + at, g.begin() + at + k});
    });
  }
  void bind_copy(const std::vector<const void*>& p) override {
    each_slice(&Layer::param_specs,
               [&](Layer* l, size_t at, size_t k) { l->bind_copy({p.begin() + at, p.begin() + at + k}); });
  }
  void bind_buffers(const std::vector<float*>& b) override {
    each_slice(&Layer::buffer_specs,
               [&](Layer* l, size_t at, size_t k) { l->bind_buffers({b.begin() + at, b.begin() + at + k}); });
  }
  void set_dtype(DType t) override {
    Layer::set_dtype(t);
    for (Layer* l : parts()) l->set_dtype(t);
  }
  void set_batch(const BatchContext& ctx) override {
    for (Layer* l : parts()) l->set_batch(ctx);
  }
  void set_scratch(ScratchRegion* region, bool recomputed) override {
    Layer::set_scratch(region, recomputed);
    for (Layer* l : parts()) l->set_scratch(region, recomputed);
  }
  size_t bytes_per_sample() const override {
    size_t b = Layer::bytes_per_sample();
    for (Layer* l : parts()) b += l->bytes_per_sample();
    return b;
  }
  double flops_per_sample() const override {
    double f = 0;
    for (Layer* l : parts()) f += l->flops_per_sample();
    return f;
  }

 protected:
  // `part`'s slice of this layer's parameters and buffers (they are the parts', in order).
  OnnxWeights part_weights(const OnnxWeights& w, const Layer* part) const {
    size_t p = 0, b = 0;
    for (Layer* l : parts()) {
      if (l == part) return w.slice(p, l->param_specs().size(), b, l->buffer_specs().size());
      p += l->param_specs().size();
      b += l->buffer_specs().size();
    }
    raise(kExitFailure, "layer %s is no part of %s", part->name().c_str(), name_.c_str());
  }
  OnnxValue export_part(OnnxBuilder& b, const Layer* part, const OnnxValue& x, const OnnxWeights& w) const {
    return part->export_onnx(b, {x}, part_weights(w, part));
  }
  // The parts in parameter order. Kept in a member, set whenever the composition changes: set_batch runs
  // through them every step, and a list made per call would cost a heap allocation per composite per step.
  const std::vector<Layer*>& parts() const { return parts_; }
  void set_parts(std::vector<Layer*> parts) { parts_ = std::move(parts); }
  // What goes before the names of `part`'s parameters and buffers.
  virtual std::string prefix(const Layer& part) const = 0;

 private:
  using Specs = std::vector<ParamSpec> (Layer::*)() const;
  // f(part, first, count) for each part's slice of a list that concatenates the parts' specs.
  template <class F>
  void each_slice(Specs specs, F f) {
    size_t at = 0;
    for (Layer* l : parts()) {
      const size_t k = (l->*specs)().size();
      f(l, at, k);
      at += k;
    }
  }
  std::vector<ParamSpec> collect(Specs specs) const {
    std::vector<ParamSpec> v;
    for (Layer* l : parts())
      for (ParamSpec s : (l->*specs)()) {
        s.name = prefix(*l) + s.name;
        v.push_back(s);
      }
    return v;
  }

  std::vector<Layer*> parts_;
};

class Chain : public Composite {
 public:
  Chain(const std::string& name, std::vector<std::unique_ptr<Layer>> layers)
      : Composite(name), subs_(std::move(layers)) {
    CNN_CHECK(!subs_.empty(), "empty chain %s", name.c_str());
    std::vector<Layer*> parts;
    for (const auto& l : subs_) parts.push_back(l.get());
    set_parts(std::move(parts));
    for (const auto& l : subs_) CNN_CHECK(!l->is_view(), "view layer %s inside chain %s", l->name().c_str(), name.c_str());
  }
  std::string describe() const override {
    std::string s;
    for (const auto& l : subs_) s += (s.empty() ? "" : ", ") + l->describe();
    return s;
  }
  Dims setup(const Dims& in) override {
    in_ = in;
    dims_.clear();
    Dims d = in;
    for (auto& l : subs_) {
      d = l->setup(d);
      dims_.push_back(d);
    }
    return d;
  }
  void allocate(Backend& be, int max_n) override {
    size_t most = in_.size();
    // The last sub-layer writes straight into the chain's output. Sized first: alloc_state keeps the
    // addresses of the elements.
    acts_.assign(subs_.size() - 1, nullptr);
    for (size_t i = 0; i < subs_.size(); ++i) {
      subs_[i]->allocate(be, max_n);
      most = std::max(most, dims_[i].size());
      if (i + 1 < subs_.size()) alloc_state(be, act_size() * dims_[i].size(), max_n, &acts_[i]);
    }
    for (auto& g : g_) alloc_temp(be, act_size() * most, max_n, &g);
  }
  void forward(Backend& be, const void* x, void* y, int n, bool train) override { run(be, x, y, n, train, false); }
  void recompute(Backend& be, const void* x, void* y, int n) override { run(be, x, y, n, true, true); }
  void backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) override {
    const void* g = dy;
    int flip = 0;
    for (size_t i = subs_.size(); i-- > 0;) {
      const void* in = i == 0 ? x : acts_[i - 1];
      const void* out = i + 1 < subs_.size() ? acts_[i] : y;
      void* gin = i == 0 ? dx : g_[flip];
      subs_[i]->backward(be, in, out, g, gin, n);
      g = gin;
      flip ^= 1;
    }
  }
  // The chain's input gradient is its first part's.
  bool set_add_input_grad(Backend& be, int n, bool add) override { return subs_[0]->set_add_input_grad(be, n, add); }
  // The layouts of the tensors between the parts: pick_layouts (layers.h).
  bool can_use_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) const override {
    return !pick_layouts(be, max_n, parts(), in, out).empty();
  }
  void set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) override {
    const std::vector<ActLayout> t = pick_layouts(be, max_n, parts(), in, out);
    CNN_CHECK(!t.empty(), "chain %s: asked for activation layouts it cannot use", name_.c_str());
    blocked_inside_ = std::find(t.begin() + 1, t.end() - 1, ActLayout::kNChw16c) != t.end() - 1;
    for (size_t i = 0; i < subs_.size(); ++i) subs_[i]->set_layouts(be, max_n, t[i], t[i + 1]);
  }
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    OnnxBuilder::Scope scope(b, name_.empty() ? "" : name_ + ".");  // node names follow the parameter names
    OnnxValue v = in[0];
    for (const auto& l : subs_) v = export_part(b, l.get(), v, w);
    return v;
  }
  bool blocked_inside() const { return blocked_inside_; }

 private:
  std::string prefix(const Layer& part) const override {
    return (name_.empty() ? "" : name_ + ".") + part.name() + ".";
  }
  void run(Backend& be, const void* x, void* y, int n, bool train, bool again) {
    const void* cur = x;
    for (size_t i = 0; i < subs_.size(); ++i) {
      void* out = i + 1 < subs_.size() ? acts_[i] : y;
      if (again) {
        subs_[i]->recompute(be, cur, out, n);
      } else {
        subs_[i]->forward(be, cur, out, n, train);
      }
      cur = out;
    }
  }

  std::vector<std::unique_ptr<Layer>> subs_;
  bool blocked_inside_ = false;  // set_layouts chose nChw16c for a tensor between two parts
  Dims in_;
  std::vector<Dims> dims_;
  std::vector<void*> acts_;
  void* g_[2] = {nullptr, nullptr};
};

// Appends a bias-free conv (the batch norm's beta is the bias) and its batch norm (fused with a ReLU).
void conv_bn(std::vector<std::unique_ptr<Layer>>& v, const std::string& conv, const std::string& bn, int out,
             int kernel, int stride, const BnOptions& o, bool relu) {
  v.push_back(make_conv2d(conv, out, {kernel, stride, kernel / 2, false}));
  v.push_back(make_batchnorm(bn, o, relu));
}

// out = relu(bn(main(x)) + shortcut(x)); the batch norm closing the main path runs fused with the join and
// the ReLU (one pass over the activations, and one in backward). The shortcut is decided at setup, once the
// input shape is known. Parameters: main's, the batch norm's, then the projection's (the order of a chain
// main + bn, so checkpoint names and offsets are those of the unfused block).
class Residual : public Composite {
 public:
  Residual(const std::string& name, std::unique_ptr<Layer> main, std::unique_ptr<BatchNormJoin> bn,
           const std::string& kind, int out, int stride, Shortcut sc, const BnOptions& bn_opt)
      : Composite(name), main_(std::move(main)), bn_(std::move(bn)), kind_(kind), out_(out), stride_(stride), sc_(sc),
        bn_opt_(bn_opt) {
    set_parts({main_.get(), bn_.get()});
  }
  std::string describe() const override {
    const char* sc = mode_ == kIdentity ? "identity" : mode_ == kProject ? "projection" : "pad";
    return strprintf("%s %d->%d stride %d, %s shortcut%s%s", kind_.c_str(), in_.c, out_, stride_, sc,
                     recompute_ ? ", recomputed" : "", blocked_ ? ", nChw16c" : "");
  }
  Dims setup(const Dims& in) override {
    in_ = in;
    out_dims_ = bn_->setup(main_->setup(in));
    CNN_CHECK(out_dims_.c == out_, "block %s: main path ends in %d channels, not %d", name_.c_str(), out_dims_.c, out_);
    if (stride_ == 1 && in.c == out_) {
      mode_ = kIdentity;
    } else if (sc_ == Shortcut::kPad) {
      if (out_ < in.c)
        raise(kExitUsage, "block %s: a zero-padding shortcut cannot reduce %d channels to %d", name_.c_str(), in.c,
              out_);
      mode_ = kPad;
    } else {
      mode_ = kProject;
      // Created once (setup may run again on the same input, e.g. to read the shapes back after build; a new
      // chain would drop the allocated and bound one).
      if (!proj_) {
        std::vector<std::unique_ptr<Layer>> v;
        conv_bn(v, "0", "1", out_, 1, stride_, bn_opt_, false);
        proj_ = make_chain("downsample", std::move(v));
        proj_->set_dtype(dt_);  // created here, after the net set the block's type
        set_parts({main_.get(), bn_.get(), proj_.get()});
      }
    }
    Dims sd = mode_ == kProject ? proj_->setup(in)
              : mode_ == kPad   ? Dims{(in.h + stride_ - 1) / stride_, (in.w + stride_ - 1) / stride_, out_}
                                : in;
    if (!(sd == out_dims_))
      raise(kExitUsage, "block %s: the shortcut gives %dx%dx%d but the main path %dx%dx%d (input %dx%d)",
            name_.c_str(), sd.h, sd.w, sd.c, out_dims_.h, out_dims_.w, out_dims_.c, in.h, in.w);
    return out_dims_;
  }
  // Recomputing: between forward and backward the block keeps only its input and output (the net's), the
  // join's 1-bit ReLU mask and the batch norms' per-channel statistics; backward reruns main and the
  // projection first (the join's batch norm needs only its input, main's output, so it is not rerun).
  bool make_recomputing(ScratchRegion& region) override {
    recompute_ = true;
    set_scratch(&region, true);
    return true;
  }
  void set_scratch(ScratchRegion* region, bool recomputed) override {
    Layer::set_scratch(region, recomputed);
    main_->set_scratch(region, recomputed);
    bn_->set_scratch(region, false);
    if (proj_) proj_->set_scratch(region, recomputed);
  }
  // The block's input and output in nChw16c where its parts can take them: the shortcut's output is the
  // join's residual (the input itself for an identity shortcut; the padding and projection shortcuts read
  // NHWC). Inside, main's output in nChw16c for the join's batch norm where both can, and main picks the
  // layouts inside itself. A net picks the layouts between its layers (Net::pick_layouts); NHWC otherwise.
  bool can_use_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) const override {
    return main_layout(be, max_n, in, out) >= 0;
  }
  void set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) override {
    const int b = main_layout(be, max_n, in, out);
    CNN_CHECK(b >= 0, "block %s: asked for activation layouts it cannot use", name_.c_str());
    const ActLayout nhwc = ActLayout::kNHWC, m = b ? ActLayout::kNChw16c : nhwc;
    main_->set_layouts(be, max_n, in, m);
    bn_->set_layouts(be, max_n, m, out);
    bn_->set_residual_layout(mode_ == kIdentity ? in : nhwc);
    const auto* chain = dynamic_cast<const Chain*>(main_.get());
    blocked_ = in != nhwc || out != nhwc || b || (chain && chain->blocked_inside());
    layouts_set_ = true;
  }
  void allocate(Backend& be, int max_n) override {
    if (!layouts_set_) set_layouts(be, max_n, ActLayout::kNHWC, ActLayout::kNHWC);
    if (recompute_) scratch()->begin_block();
    for (Layer* l : parts()) l->allocate(be, max_n);
    const size_t out = act_size() * out_dims_.size();
    alloc_state(be, out, max_n, &m_);
    alloc_temp(be, out, max_n, &dm_);
    alloc_temp(be, out, max_n, &dz_);
    if (mode_ != kIdentity) alloc_state(be, out, max_n, &s_);
    if (mode_ == kProject) alloc_temp(be, act_size() * in_.size(), max_n, &tmp_);
  }
  void forward(Backend& be, const void* x, void* y, int n, bool train) override {
    main_->forward(be, x, m_, n, train);
    const void* s = x;
    if (mode_ == kProject) {
      proj_->forward(be, x, s_, n, train);
      s = s_;
    } else if (mode_ == kPad) {
      be.shortcut_pad_forward(dt_, n, in_.h, in_.w, in_.c, stride_, out_, x, s_);
      s = s_;
    }
    bn_->forward_join(be, m_, s, y, n, train);
  }
  void backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) override {
    if (recompute_) {
      main_->recompute(be, x, m_, n);
      // The padding shortcut's output is not needed by backward.
      if (mode_ == kProject) proj_->recompute(be, x, s_, n);
    }
    // Identity: where main's first convolution can add its input gradient into dx, the join's batch norm writes
    // the shortcut's gradient there first (no axpy over the block's input gradient; docs/perf.md, eighteenth pass).
    const bool add = dx && mode_ == kIdentity && main_->set_add_input_grad(be, n, true);
    bn_->backward_join(be, m_, y, dy, dm_, add ? dx : dz_, n);
    main_->backward(be, x, m_, dm_, dx, n);
    const size_t in = in_.size() * n;
    if (add) {
      main_->set_add_input_grad(be, n, false);
    } else if (mode_ == kProject) {
      proj_->backward(be, x, s_, dz_, dx ? tmp_ : nullptr, n);
      if (dx) be.axpy(dt_, in, 1.f, tmp_, dx);
    } else if (dx && mode_ == kPad) {
      be.shortcut_pad_backward_add(dt_, n, in_.h, in_.w, in_.c, stride_, out_, dz_, dx);  // into main's dx
    } else if (dx) {
      be.axpy(dt_, in, 1.f, dz_, dx);
    }
  }
  double flops_per_sample() const override { return Composite::flops_per_sample() + 2.0 * out_dims_.size(); }
  // Standard nodes: main path, its batch norm, the shortcut (identity; projection; or option A as a strided
  // Slice and a Pad with zero channels), Add and Relu.
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    OnnxBuilder::Scope scope(b, name_ + ".");
    const OnnxValue x{b.map(in[0], "input"), in[0].dims, false};
    const OnnxValue m = export_part(b, bn_.get(), export_part(b, main_.get(), x, w), w);
    std::string s = x.name;
    if (mode_ == kProject) {
      s = export_part(b, proj_.get(), x, w).name;
    } else if (mode_ == kPad) {
      const int64_t big = int64_t{1} << 40;  // Slice's "to the end"
      s = b.node("Slice", "shortcut/subsample", {x.name, b.ints("shortcut/starts", {0, 0}),
                 b.ints("shortcut/ends", {big, big}), b.ints("shortcut/axes", {2, 3}),
                 b.ints("shortcut/steps", {stride_, stride_})});
      s = b.node("Pad", "shortcut", {s, b.ints("shortcut/pads", {0, 0, 0, 0, 0, out_ - in_.c, 0, 0})});
    }
    const std::string sum = b.node("Add", "add", {m.name, s});
    return {b.node("Relu", "relu", {sum}), out_dims_, false};
  }

 private:
  enum Mode { kIdentity, kProject, kPad };
  // The layout of main's output that set_layouts(in, out) takes (1: nChw16c, 0: NHWC), -1 when none works.
  int main_layout(Backend& be, int max_n, ActLayout in, ActLayout out) const {
    const ActLayout nhwc = ActLayout::kNHWC, blk = ActLayout::kNChw16c;
    if (in != nhwc && mode_ != kIdentity) return -1;
    // A blocked residual needs the batch norm's blocked kernels, whatever x and y are.
    if (in != nhwc && !bn_->can_use_layouts(be, max_n, blk, blk)) return -1;
    for (int b = 1; b >= 0; --b) {
      const ActLayout m = b ? blk : nhwc;
      if (bn_->can_use_layouts(be, max_n, m, out) && main_->can_use_layouts(be, max_n, in, m)) return b;
    }
    return -1;
  }
  // main's names as they are (its sub-layers are named by the unnamed chain), the batch norm's prefixed with
  // its name (as the chain would), the projection's as they are (a named chain: "downsample.").
  std::string prefix(const Layer& part) const override { return &part == bn_.get() ? bn_->name() + "." : ""; }

  std::unique_ptr<Layer> main_;
  std::unique_ptr<BatchNormJoin> bn_;
  std::unique_ptr<Layer> proj_;
  std::string kind_;
  int out_, stride_;
  Shortcut sc_;
  BnOptions bn_opt_;
  Mode mode_ = kIdentity;
  bool blocked_ = false;      // tensors in nChw16c (set_layouts)
  bool layouts_set_ = false;  // by the net; allocate takes NHWC in and out otherwise
  Dims in_, out_dims_;
  bool recompute_ = false;
  void *m_ = nullptr, *dm_ = nullptr, *s_ = nullptr, *dz_ = nullptr, *tmp_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> make_chain(const std::string& name, std::vector<std::unique_ptr<Layer>> layers) {
  return std::make_unique<Chain>(name, std::move(layers));
}

std::unique_ptr<Layer> make_basic_block(const std::string& name, int out, int stride, Shortcut sc,
                                        const BnOptions& bn) {
  std::vector<std::unique_ptr<Layer>> v;
  conv_bn(v, "conv1", "bn1", out, 3, stride, bn, true);
  v.push_back(make_conv2d("conv2", out, {3, 1, 1, false}));
  return std::make_unique<Residual>(name, make_chain("", std::move(v)), make_batchnorm_join("bn2", bn), "basic block",
                                    out, stride, sc, bn);
}

std::unique_ptr<Layer> make_bottleneck_block(const std::string& name, int mid, int stride, const BnOptions& bn) {
  std::vector<std::unique_ptr<Layer>> v;
  conv_bn(v, "conv1", "bn1", mid, 1, 1, bn, true);
  conv_bn(v, "conv2", "bn2", mid, 3, stride, bn, true);
  v.push_back(make_conv2d("conv3", 4 * mid, {1, 1, 0, false}));
  return std::make_unique<Residual>(name, make_chain("", std::move(v)), make_batchnorm_join("bn3", bn), "bottleneck",
                                    4 * mid, stride, Shortcut::kProjection, bn);
}

}  // namespace cnn
