// Layers. A layer owns views into the net's flat parameter and gradient buffers (declared through
// param_specs(), bound by bind()) and runs its ops through a Backend. Activations are NHWC, stored as the net's
// activation type (fp32, bf16 or fp16: set_dtype; the Backend's ops take it as their DType), hence void*;
// parameters and their gradients are always fp32 (docs/mixed_precision.md). Where the fast CPU backend's
// convolutions work in oneDNN's blocked nChw16c, residual blocks and the net keep the tensors inside and
// between such blocks in it instead (can_use_layouts/set_layouts; the net's input and logits stay NHWC).
// Non-trained state (batch-norm running statistics) lives in a third flat array, the net's "buffers"
// (declared through buffer_specs(), bound by bind_buffers()): never in the gradient, the allreduce or the
// optimizer; the trainer averages it across ranks before evaluation.
#pragma once
#include <cstdint>
#include <functional>
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
  bool decay = true;       // weights; false for biases and norm scales/shifts (decayed only with
                           // --train.decay_bn_bias)
  size_t size() const {
    size_t n = 1;
    for (int d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

class Collectives;
class ScratchRegion;
class OnnxBuilder;
struct OnnxValue;
struct OnnxWeights;

// What layers know about the current (micro-)batch: dropout masks are a function of (seed, step, global
// sample id), so they do not depend on the rank count or the position in the local batch; synchronised batch
// norm sums its statistics over the ranks that share the global batch.
struct BatchContext {
  uint64_t seed = 0;
  int64_t step = 0;              // optimizer step
  const int64_t* ids = nullptr;  // device [n] global sample ids; null: 0..n-1
  Collectives* comm = nullptr;   // the ranks sharing this global batch; null: this process alone
  // >= 0: a pass that recomputes batch norm's running statistics (torch.optim.swa_utils.update_bn): they become
  // the equal-weight average of the statistics of every batch the layer normalises in train mode from the
  // forward with index 0 of the pass on (momentum 1/k for its k-th batch, torch's momentum None; each ghost
  // group is a batch, a synchronised layer's global batch one). -1: the configured momentum.
  int64_t bn_average_index = -1;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer();  // releases what alloc_state/alloc_temp took from the backend (src/model/scratch.cpp)
  const std::string& name() const { return name_; }
  virtual std::string describe() const = 0;
  // Fixes the input shape; returns the output shape. Throws cnn::Error(kExitUsage) if the shape cannot work.
  virtual Dims setup(const Dims& in) = 0;
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual void bind(const std::vector<float*>& params, const std::vector<float*>& grads) {}
  // The parameters in the activation type, in param_specs() order, for the ops that read them in 16 bits
  // (convolution, linear): the net's 16-bit copy, or the fp32 parameters themselves in an fp32 net (what
  // layers use when bind_copy is never called).
  virtual void bind_copy(const std::vector<const void*>& params) {}
  // Storage type of activations and activation gradients; set by the net before setup().
  virtual void set_dtype(DType t) { dt_ = t; }
  DType dtype() const { return dt_; }
  // Non-trained state (init kZero/kOne), bound like parameters.
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
  virtual void bind_buffers(const std::vector<float*>& buffers) {}
  // Called before forward() with the batch about to run (only layers with randomness care).
  virtual void set_batch(const BatchContext& ctx) {}
  // Allocates per-batch scratch for up to max_n samples (through alloc_per_sample, so that it is counted).
  virtual void allocate(Backend& be, int max_n) {}
  // Bytes of activations, activation gradients and per-sample scratch (masks, argmax) this layer allocated per
  // sample, sub-layers included.
  virtual size_t bytes_per_sample() const { return per_sample_bytes_; }
  // Output is the input buffer itself (reshapes such as flatten).
  virtual bool is_view() const { return false; }
  virtual void forward(Backend& be, const void* x, void* y, int n, bool train) = 0;
  // Parameter gradients accumulate; dx is overwritten and may be null (nothing needs the input gradient).
  virtual void backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) = 0;
  // add: backward() with batch n adds the input gradient into dx instead of overwriting it, where this layer can
  // on `be` (a residual block's main path, whose input gradient meets the shortcut's); returns whether it will.
  // add = false: overwriting again. Layers that cannot (the default) return false.
  virtual bool set_add_input_grad(Backend& be, int n, bool add) { return false; }
  virtual double flops_per_sample() const { return 0; }  // forward multiply-adds * 2

  // Activation layouts of input and output (kernels/backend.h ActLayout): NHWC, unless a residual block keeps
  // the tensors inside it in oneDNN's nChw16c where the backend's convolutions work in it (src/model/blocks.cpp;
  // no conversion around the Winograd kernels, docs/perf.md). can_use_layouts: whether this layer can run with
  // them on `be` for up to max_n samples (after setup(), the type set); set_layouts: from now on it does (before
  // allocate(); a composite picks the layouts inside it). Plain layers take NHWC only.
  virtual bool can_use_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) const {
    return in == ActLayout::kNHWC && out == ActLayout::kNHWC;
  }
  virtual void set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out);

  // Activation recomputation (docs/perf.md): a residual block that keeps only its input and output and reruns
  // the rest in backward. The net asks a top-level layer with make_recomputing(); false: it cannot (plain
  // layers). Call after setup(), before allocate().
  virtual bool make_recomputing(ScratchRegion& region) { return false; }
  // Set by a recomputing block on its parts before allocate(): alloc_temp() memory then comes from `region`,
  // shared by all recomputing blocks, and so does alloc_state() memory when `recomputed` (the block reruns
  // this layer's forward through recompute() before its backward).
  virtual void set_scratch(ScratchRegion* region, bool recomputed) {
    scratch_ = region;
    recomputed_ = recomputed;
  }
  // The training forward again on the same input, right before backward: the same outputs and the same state
  // for backward, without the side effects (running statistics are not updated again, no collectives).
  virtual void recompute(Backend& be, const void* x, void* y, int n) { forward(be, x, y, n, true); }

  // ONNX export (src/model/onnx/onnx_export.h): adds to `b` the standard ONNX nodes that compute this layer's
  // inference output from `in` (one value per input), its parameters and buffers `w` (param_specs() and
  // buffer_specs() order, final names, host values) becoming initializers; returns the output. After setup().
  // The default refuses with exit 2 naming the layer.
  virtual OnnxValue export_onnx(OnnxBuilder& b, const std::vector<OnnxValue>& in, const OnnxWeights& w) const;

 protected:
  // be.alloc of max_n samples of `per_sample` bytes, counted in bytes_per_sample().
  void* alloc_per_sample(Backend& be, size_t per_sample, int max_n) {
    per_sample_bytes_ += per_sample;
    return be.alloc(per_sample * static_cast<size_t>(max_n));
  }
  // Per-sample memory (count samples of per_sample bytes) owned by this Layer, counted in bytes_per_sample()
  // unless it lies in the shared region of set_scratch(): *where is set at once, or when the region is
  // allocated (after every layer's allocate()).
  // State: what forward leaves for backward (intermediate activations, ReLU masks); shared when recomputed.
  template <class T>
  void alloc_state(Backend& be, size_t per_sample, int count, T** where) {
    place(be, per_sample, count, recomputed_, [where](void* p) { *where = static_cast<T*>(p); });
  }
  // Temporaries of one backward() call (activation gradients); shared whenever a region is set.
  template <class T>
  void alloc_temp(Backend& be, size_t per_sample, int count, T** where) {
    place(be, per_sample, count, true, [where](void* p) { *where = static_cast<T*>(p); });
  }
  // Bytes of one element of an activation.
  size_t act_size() const { return dtype_size(dt_); }
  bool recomputed() const { return recomputed_; }
  ScratchRegion* scratch() const { return scratch_; }

  std::string name_;
  DType dt_ = DType::kF32;

 private:
  void place(Backend& be, size_t per_sample, int count, bool shareable, std::function<void(void*)> bind);

  size_t per_sample_bytes_ = 0;
  ScratchRegion* scratch_ = nullptr;
  bool recomputed_ = false;
  Backend* owner_ = nullptr;  // of owned_
  std::vector<void*> owned_;
};

// The layouts of the tensors of a sequence of layers (layers[i] reads tensor i and writes tensor i+1; tensor 0
// in `in`, the last in `out`) with the most nChw16c tensors between them that every layer can run with (ties:
// NHWC); empty when there are none. A chain's parts, a sequential net's layers (Layer::set_layouts).
std::vector<ActLayout> pick_layouts(Backend& be, int max_n, const std::vector<Layer*>& layers, ActLayout in,
                                    ActLayout out);

// A layer of several inputs (a graph's joins: Add, ...), added to a Net with Net::add(layer, inputs). The
// single-input entry points are not used: the net calls the *_inputs ones.
class MultiInputLayer : public Layer {
 public:
  using Layer::Layer;
  // Fixes the input shapes; returns the output shape. Throws Error(kExitUsage) naming the layer and the shapes
  // if they cannot work.
  virtual Dims setup_inputs(const std::vector<Dims>& in) = 0;
  virtual void forward_inputs(Backend& be, const std::vector<const void*>& xs, void* y, int n, bool train) = 0;
  // dxs[k]: the gradient of input k, overwritten; null where nothing needs it.
  virtual void backward_inputs(Backend& be, const std::vector<const void*>& xs, const void* y, const void* dy,
                               const std::vector<void*>& dxs, int n) = 0;

  // One input (a graph node reading one value): the *_inputs calls with that one (net_graph.cpp; out of line
  // so that a two-input layer's body is not inlined here, where GCC would see its second input read).
  Dims setup(const Dims& in) final;
  void forward(Backend& be, const void* x, void* y, int n, bool train) final;
  void backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) final;
};

// y = x1 + x2 + ... (same shapes); every input's gradient is dy.
std::unique_ptr<MultiInputLayer> make_add(const std::string& name);
// The residual join of a block with stochastic depth (Huang et al. 2016; torchvision's StochasticDepth(p, "row")
// on the branch, then the add): inputs (shortcut x, branch b) of one shape, y = x + b * keep / (1 - p) in
// training with keep ~ Bernoulli(1 - p) once per sample, y = x + b in evaluation. A sample's keep is dropout's
// keep bit of element 0 of (batch_draw_key(ctx, kStochasticDepthStream, name), global sample id), so it does not
// depend on the rank count either.
std::unique_ptr<MultiInputLayer> make_stochastic_depth_add(const std::string& name, float p);
constexpr uint64_t kStochasticDepthStream = 0x53444550ull;  // "SDEP": apart from dropout's draws from the seed
// y = a * b: equal shapes, or one input [1,1,C] scaling the other [H,W,C] per channel (squeeze-excitation).
std::unique_ptr<MultiInputLayer> make_mul(const std::string& name);
// The inputs (equal H and W) concatenated along the channels, in input order.
std::unique_ptr<MultiInputLayer> make_concat(const std::string& name);
// y = f(x) for the parameterised activations of Backend::activation_forward (LeakyRelu, Clip, Sigmoid, ...).
std::unique_ptr<Layer> make_activation(const std::string& name, const Activation& a);

struct ConvOptions {
  int kernel = 3, stride = 1, pad = 1;
  bool bias = true;
  int groups = 1, dilation = 1;          // ConvDesc::groups, dilation_h = dilation_w
  int extra_pad_h = 0, extra_pad_w = 0;  // ConvDesc::extra_pad_h/w: more padding after the input than before
};

std::unique_ptr<Layer> make_conv2d(const std::string& name, int out_channels, const ConvOptions& opt);
std::unique_ptr<Layer> make_linear(const std::string& name, int out_features, bool bias = true);
std::unique_ptr<Layer> make_relu(const std::string& name);
// With relu_before: a ReLU followed by the pooling, run as one op (the ReLU on the pooled values).
std::unique_ptr<Layer> make_maxpool(const std::string& name, int kernel, int stride, int pad = 0,
                                    bool relu_before = false);
std::unique_ptr<Layer> make_flatten(const std::string& name);

// Normalisation, regularisation and average pooling.
struct BnOptions {
  float momentum = 0.1f;  // running = (1-momentum) running + momentum * batch
  float eps = 1e-5f;
  // Training statistics over fixed groups of this many samples ("ghost" batch norm); 0 = the rank's whole
  // (micro-)batch. A fixed group makes training independent of the rank count (exact resharded resume).
  int group = 0;
  // Synchronised: training statistics over the whole global batch, the per-channel sums added up across the
  // ranks of BatchContext::comm in forward and backward (exclusive with group). fp32 activations only: a
  // 16-bit net with a synchronised batch norm is refused at setup (docs/mixed_precision.md).
  bool sync = false;
};
// Batch normalisation per channel; params weight (gamma, init 1) and bias (beta, init 0), neither decayed
// unless --train.decay_bn_bias; buffers running_mean, running_var. Training normalises with this rank's
// (micro-)batch statistics (with sync: the global batch's); evaluation with the running statistics. With a ReLU
// in `act` (true, or BnAct::relu_capped(6) for ReLU6) the layer is batch norm followed by that activation, run
// as one fused op (the activations are read and written once).
std::unique_ptr<Layer> make_batchnorm(const std::string& name, const BnOptions& opt = {}, BnAct act = false);

// The batch norm that closes a residual block, fused with the block's join: y = relu(bn(x) + z), z the
// shortcut branch's output (same shape as x). forward()/backward() are a plain batch norm.
class BatchNormJoin : public Layer {
 public:
  using Layer::Layer;
  virtual void forward_join(Backend& be, const void* x, const void* z, void* y, int n, bool train) = 0;
  // dx, dz: gradients of x and z, overwritten (dx may be null).
  virtual void backward_join(Backend& be, const void* x, const void* y, const void* dy, void* dx, void* dz,
                             int n) = 0;
  // Layout of z and dz (NHWC unless set; nChw16c only where can_use_layouts admits nChw16c at all).
  virtual void set_residual_layout(ActLayout l) = 0;
};
std::unique_ptr<BatchNormJoin> make_batchnorm_join(const std::string& name, const BnOptions& opt = {});
// What the graph rewrites (src/model/graph_rewrite.h) recognise: a plain ReLU (make_relu), a capped ReLU (a
// Clip activation from 0 to a positive finite cap, e.g. ReLU6: true with *cap set), an add (make_add), and a
// batch norm with no fused epilogue (make_batchnorm without relu: its options; null for any other layer).
bool is_relu(const Layer& l);
bool is_capped_relu(const Layer& l, float* cap);
bool is_add(const Layer& l);
const BnOptions* plain_batchnorm_options(const Layer& l);
// Inverted dropout with drop probability p in [0, 1); identity in evaluation.
std::unique_ptr<Layer> make_dropout(const std::string& name, float p);
// For layers that draw per-sample random numbers (dropout, stochastic depth): the key of Backend::dropout_forward
// for layer `layer` in the batch of ctx, a function of the run's seed, the step and the name only (`stream` keeps
// the kinds of draws from one seed apart); and device ids 0..max_n-1 (freed with be.release), the sample ids of a
// batch whose BatchContext has none (a net run outside the trainer).
uint64_t batch_draw_key(const BatchContext& ctx, uint64_t stream, const std::string& layer);
int64_t* upload_default_ids(Backend& be, int max_n);
std::unique_ptr<Layer> make_avgpool(const std::string& name, int kernel, int stride, int pad = 0);
// Average over all positions: [h,w,c] -> [1,1,c].
std::unique_ptr<Layer> make_global_avgpool(const std::string& name);

}  // namespace cnn
