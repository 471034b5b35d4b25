// Batch normalisation (optionally over fixed "ghost" groups of samples, or synchronised over all ranks), fused
// with a following ReLU (capped, as ReLU6, or not) or with a residual block's join.
#include <vector>

#include "src/base/error.h"
#include "kernels/collectives.h"
#include "src/model/layers.h"
#include "src/model/onnx/onnx_export.h"

namespace cnn {

namespace {

class BatchNorm : public BatchNormJoin {
 public:
  // join: also used through forward_join (then the ReLU mask is needed even without relu).
  BatchNorm(const std::string& name, const BnOptions& o, BnAct act, bool join)
      : BatchNormJoin(name), o_(o), act_(act), join_(join) {
    CNN_CHECK(!act.capped || (act.relu && act.cap > 0.f), "layer %s: a capped ReLU needs a cap > 0, not %g",
              name.c_str(), act.cap);
  }
  const BnOptions* plain_options() const { return act_.relu || join_ ? nullptr : &o_; }
  ~BatchNorm() override {
    if (be_) {
      be_->release(save_mean_);
      be_->release(save_invstd_);
      be_->release(stats_);
      be_->release(sums_local_);
      be_->release(sums_global_);
      be_->release(sink_);
    }
  }
  std::string describe() const override {
    return strprintf("batchnorm %d eps %g momentum %g%s%s%s", c_, o_.eps, o_.momentum,
                     o_.group > 0 ? strprintf(" group %d", o_.group).c_str() : "", o_.sync ? " sync" : "",
                     act_.capped ? strprintf(" + relu capped at %g", act_.cap).c_str() : act_.relu ? " + relu" : "");
  }
  Dims setup(const Dims& in) override {
    if (o_.sync && dt_ != DType::kF32)
      raise(kExitUsage, "layer %s: synchronised batch norm runs on fp32 activations only, not %s", name_.c_str(),
            dtype_name(dt_));
    in_ = in;
    c_ = in.c;
    return in;
  }
  std::vector<ParamSpec> param_specs() const override {
    return {{"weight", {c_}, Init::kOne, 1, false}, {"bias", {c_}, Init::kZero, 1, false}};
  }
  std::vector<ParamSpec> buffer_specs() const override {
    return {{"running_mean", {c_}, Init::kZero, 1, false}, {"running_var", {c_}, Init::kOne, 1, false}};
  }
  void bind(const std::vector<float*>& p, const std::vector<float*>& g) override {
    gamma_ = p[0];
    beta_ = p[1];
    dgamma_ = g[0];
    dbeta_ = g[1];
  }
  void bind_buffers(const std::vector<float*>& b) override {
    rmean_ = b[0];
    rvar_ = b[1];
  }
  void allocate(Backend& be, int max_n) override {
    be_ = &be;
    const int groups = o_.group > 0 ? (max_n + o_.group - 1) / o_.group : 1;
    save_mean_ = static_cast<float*>(be.alloc(sizeof(float) * c_ * groups));
    save_invstd_ = static_cast<float*>(be.alloc(sizeof(float) * c_ * groups));
    // A recomputed forward moves these instead of the running statistics.
    if (recomputed()) sink_ = static_cast<float*>(be.alloc(sizeof(float) * 2 * c_));
    if (o_.sync) {
      const size_t bytes = sizeof(double) * (2 * c_ + 1);
      stats_ = static_cast<double*>(be.alloc(bytes));
      sums_local_ = static_cast<double*>(be.alloc(bytes));
      sums_global_ = static_cast<double*>(be.alloc(bytes));
      // The synchronised ops have no fused epilogue: the join and the ReLU run as separate passes, and
      // backward needs the gradient at the batch norm's output apart from dy.
      if (act_.relu || join_) alloc_temp(be, sizeof(float) * in_.size(), max_n, &g_);
      return;
    }
    if (act_.relu || join_) {
      const int group = o_.group > 0 ? o_.group : max_n;
      mask_words_ = relu_mask_words(static_cast<size_t>(group) * in_.size());
      // Whole words per sample cover each group's mask_words_.
      alloc_state(be, sizeof(uint32_t) * relu_mask_words(in_.size()), groups * group, &mask_);
    }
  }
  void set_batch(const BatchContext& ctx) override {
    comm_ = ctx.comm;
    averaging_ = ctx.bn_average_index >= 0;
    if (ctx.bn_average_index == 0) averaged_ = 0;
  }
  void forward(Backend& be, const void* x, void* y, int n, bool train) override {
    run_forward(be, x, nullptr, act_, y, n, train ? kTrain : kInfer);
  }
  void recompute(Backend& be, const void* x, void* y, int n) override {
    CNN_CHECK(sink_, "layer %s recomputed without set_scratch(.., true) before allocate", name_.c_str());
    run_forward(be, x, nullptr, act_, y, n, kAgain);
  }
  void backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) override {
    run_backward(be, x, y, dy, act_, dx, nullptr, n);
  }
  void forward_join(Backend& be, const void* x, const void* z, void* y, int n, bool train) override {
    run_forward(be, x, z, true, y, n, train ? kTrain : kInfer);
  }
  void backward_join(Backend& be, const void* x, const void* y, const void* dy, void* dx, void* dz,
                     int n) override {
    run_backward(be, x, y, dy, true, dx, dz, n);
  }
  double flops_per_sample() const override { return 2.0 * in_.size(); }
  // nChw16c input and/or output where the backend has batch norm over it; not synchronised (its statistics
  // ops are NHWC). A join's residual and its gradient: set_residual_layout.
  bool can_use_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) const override {
    if (in == ActLayout::kNHWC && out == ActLayout::kNHWC) return true;
    return !o_.sync && c_ % 16 == 0 && be.blocked_batchnorm_ok(dt_);
  }
  void set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) override {
    Layer::set_layouts(be, max_n, in, out);
    shape_.x = in;
    shape_.y = out;
  }
  void set_residual_layout(ActLayout l) override {
    CNN_CHECK(l == ActLayout::kNHWC || join_, "layer %s: a residual layout for a batch norm without a join",
              name_.c_str());
    shape_.residual = l;
  }
  // Inference with the running statistics (training_mode 0), the fused ReLU as its own node (Relu, or Clip from 0
  // to the cap). A join's add and ReLU are the residual block's (blocks.cpp).
  OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const override {
    std::vector<std::string> inputs{b.map(in[0], name_)};
    for (const auto* group : {&w.params, &w.buffers})
      for (const OnnxWeight& t : *group) {
        b.initializer(t.name, {c_}, std::vector<float>(t.data, t.data + c_));
        inputs.push_back(t.name);
      }
    const std::string y = b.node("BatchNormalization", act_.relu ? name_ + "/bn" : name_, inputs,
                                 {{"epsilon", OnnxBuilder::attr(o_.eps)},
                                  {"momentum", OnnxBuilder::attr(1.f - o_.momentum)},  // ONNX: of the old value
                                  {"training_mode", OnnxBuilder::attr(int64_t{0})}});
    if (act_.capped) {
      const std::string lo = b.scalar(name_ + "/min", 0.f), hi = b.scalar(name_ + "/max", act_.cap);
      return {b.node("Clip", name_, {y, lo, hi}), in_, false};
    }
    return {act_.relu ? b.node("Relu", name_, {y}) : y, in_, false};
  }

 private:
  static const void* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }
  static void* at(void* p, size_t bytes) { return static_cast<char*>(p) + bytes; }
  int group_of(int n) const {
    if (o_.group <= 0) return n;
    CNN_CHECK(n % o_.group == 0, "layer %s: %d samples are not a multiple of the batch-norm group %d",
              name_.c_str(), n, o_.group);
    return o_.group;
  }
  // kAgain: the training forward recomputed before backward (Layer::recompute): the same ops on the same
  // input, so the same outputs, mask and saved statistics, but the running statistics stay as the forward
  // left them, and synchronised batch norm reuses the forward's global sums instead of summing across the
  // ranks again (nothing writes stats_ between a forward and its backward).
  enum Pass { kInfer, kTrain, kAgain };
  static Activation clip_of(BnAct act) { return {ActKind::kClip, 0.f, act.cap}; }
  // Of the next batch whose statistics join the running ones; a recomputing pass (kAgain) updates no running
  // statistics, so it is no batch of the average either.
  float momentum(Pass pass) {
    return averaging_ && pass != kAgain ? 1.f / static_cast<float>(++averaged_) : o_.momentum;
  }
  // The synchronised path is fp32 only (setup refuses it otherwise), hence the casts in it.
  void run_forward(Backend& be, const void* x, const void* z, BnAct act, void* y, int n, Pass pass) {
    be.set_label(name_.c_str());
    if (pass == kInfer) {
      if (nhwc())
        be.batchnorm_forward_infer(dt_, n * in_.h * in_.w, c_, x, z, gamma_, beta_, rmean_, rvar_, o_.eps, act, y);
      else
        be.batchnorm_forward_infer_layout(dt_, shape(n), x, z, gamma_, beta_, rmean_, rvar_, o_.eps, act, y);
      return;
    }
    float* rmean = pass == kAgain ? sink_ : rmean_;
    float* rvar = pass == kAgain ? sink_ + c_ : rvar_;
    if (o_.sync) {
      const int rows = n * in_.h * in_.w;
      const float* x32 = static_cast<const float*>(x);
      float* y32 = static_cast<float*>(y);
      if (pass == kTrain) {
        be.batchnorm_stats(rows, c_, x32, stats_);
        if (comm_) comm_->allreduce_sum(stats_, 2 * c_ + 1, name_ + " batch-norm statistics");
      }
      be.batchnorm_forward_from_stats(rows, c_, x32, stats_, gamma_, beta_, o_.eps, momentum(pass), y32, save_mean_,
                                      save_invstd_, rmean, rvar);
      const size_t count = static_cast<size_t>(n) * in_.size();
      if (z) be.axpy(DType::kF32, count, 1.f, static_cast<const float*>(z), y32);
      if (act.capped)
        be.activation_forward(DType::kF32, clip_of(act), count, y32, y32);
      else if (act.relu)
        be.relu_forward(DType::kF32, count, y32, y32);
      return;
    }
    const int g = group_of(n);
    const size_t bytes = static_cast<size_t>(g) * in_.size() * act_size();  // one group's activations
    for (int i = 0; i < n / g; ++i) {
      const void* zi = z ? at(z, i * bytes) : nullptr;
      uint32_t* mask = act.relu ? mask_ + i * mask_words_ : nullptr;
      if (nhwc())
        be.batchnorm_forward_train(dt_, g * in_.h * in_.w, c_, at(x, i * bytes), zi, gamma_, beta_, o_.eps,
                                   momentum(pass), act, at(y, i * bytes), mask, save_mean_ + i * c_,
                                   save_invstd_ + i * c_, rmean, rvar);
      else
        be.batchnorm_forward_train_layout(dt_, shape(g), at(x, i * bytes), zi, gamma_, beta_, o_.eps, momentum(pass),
                                          act, at(y, i * bytes), mask, save_mean_ + i * c_, save_invstd_ + i * c_,
                                          rmean, rvar);
    }
  }
  // Samples are outermost in both layouts, so a ghost group is a contiguous run of samples in either.
  bool nhwc() const {
    return shape_.x == ActLayout::kNHWC && shape_.y == ActLayout::kNHWC && shape_.residual == ActLayout::kNHWC;
  }
  BnShape shape(int n) const {
    BnShape s = shape_;
    s.n = n;
    s.hw = in_.h * in_.w;
    s.c = c_;
    return s;
  }
  void run_backward(Backend& be, const void* x, const void* y, const void* dy, BnAct act, void* dx, void* dz,
                    int n) {
    be.set_label(name_.c_str());
    if (o_.sync) {
      run_backward_sync(be, static_cast<const float*>(x), static_cast<const float*>(y), static_cast<const float*>(dy),
                        act, static_cast<float*>(dx), static_cast<float*>(dz), n);
      return;
    }
    const int g = group_of(n);
    const size_t bytes = static_cast<size_t>(g) * in_.size() * act_size();
    for (int i = 0; i < n / g; ++i) {
      const uint32_t* mask = act.relu ? mask_ + i * mask_words_ : nullptr;
      void* dxi = dx ? at(dx, i * bytes) : nullptr;
      void* dzi = dz ? at(dz, i * bytes) : nullptr;
      if (nhwc())
        be.batchnorm_backward(dt_, g * in_.h * in_.w, c_, at(x, i * bytes), mask, at(dy, i * bytes), gamma_,
                              save_mean_ + i * c_, save_invstd_ + i * c_, dxi, dzi, dgamma_, dbeta_);
      else
        be.batchnorm_backward_layout(dt_, shape(g), at(x, i * bytes), mask, at(dy, i * bytes), gamma_,
                                     save_mean_ + i * c_, save_invstd_ + i * c_, dxi, dzi, dgamma_, dbeta_);
    }
  }

  // Synchronised: the statistics and the backward sums are summed over the ranks. This rank's sums give its
  // share of dgamma/dbeta (the gradient allreduce adds the shares up); dx needs the sums over the global batch.
  void run_backward_sync(Backend& be, const float* x, const float* y, const float* dy, BnAct act, float* dx,
                         float* dz, int n) {
    const int rows = n * in_.h * in_.w;
    const size_t count = static_cast<size_t>(n) * in_.size();
    const float* g = dy;  // the gradient at the batch norm's output
    if (act.capped) {  // Clip's derivative 0 < v < cap read off its output y (0 or cap where it is zero)
      be.activation_backward(DType::kF32, clip_of(act), count, y, dy, g_, false);
      g = g_;
    } else if (act.relu) {
      be.relu_backward(DType::kF32, count, y, dy, g_);
      g = g_;
    }
    if (dz) be.copy(dz, g, sizeof(float) * count);
    be.batchnorm_backward_sums(rows, c_, x, g, save_mean_, save_invstd_, sums_local_);
    const double* global = sums_local_;
    if (comm_) {
      be.copy(sums_global_, sums_local_, sizeof(double) * (2 * c_ + 1));
      comm_->allreduce_sum(sums_global_, 2 * c_ + 1, name_ + " batch-norm gradient sums");
      global = sums_global_;
    }
    be.batchnorm_backward_from_sums(rows, c_, x, g, gamma_, save_mean_, save_invstd_, sums_local_, global, dx,
                                    dgamma_, dbeta_);
  }

  BnOptions o_;
  BnAct act_;
  bool join_;
  BnShape shape_;  // the layouts of x, y (set_layouts) and the join's residual (set_residual_layout)
  Dims in_;
  int c_ = 0;
  Backend* be_ = nullptr;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *rmean_ = nullptr, *rvar_ = nullptr, *save_mean_ = nullptr, *save_invstd_ = nullptr;
  float* sink_ = nullptr;     // [2c]: what a recomputed forward writes for the running mean and variance
  uint32_t* mask_ = nullptr;  // the ReLU's mask per group, mask_words_ apart
  size_t mask_words_ = 0;
  // Synchronised batch norm: statistics and gradient sums, double [2c+1] each; the gradient at the output
  // (with a ReLU or join); the ranks to sum over.
  double *stats_ = nullptr, *sums_local_ = nullptr, *sums_global_ = nullptr;
  float* g_ = nullptr;
  Collectives* comm_ = nullptr;
  bool averaging_ = false;  // BatchContext::bn_average_index >= 0
  int64_t averaged_ = 0;    // batches averaged into the running statistics so far in that pass
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm(const std::string& name, const BnOptions& opt, BnAct act) {
  return std::make_unique<BatchNorm>(name, opt, act, false);
}
std::unique_ptr<BatchNormJoin> make_batchnorm_join(const std::string& name, const BnOptions& opt) {
  return std::make_unique<BatchNorm>(name, opt, false, true);
}
const BnOptions* plain_batchnorm_options(const Layer& l) {
  const auto* bn = dynamic_cast<const BatchNorm*>(&l);
  return bn ? bn->plain_options() : nullptr;
}

}  // namespace cnn
