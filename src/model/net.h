// A network: a sequence of layers, each reading the previous one's output or, added with named inputs, the
// outputs of any earlier layers (a graph in topological order: branches, residual joins), over one flat
// parameter buffer and one flat gradient buffer (contiguous,
// so gradient allreduce buckets, optimizer state and checkpoints are slices of one array). Parameters are laid
// out in layer order; backward reports, layer by layer, from which offset on the gradient is final.
// A third flat array, buffers(), holds non-trained state (batch-norm running statistics): not part of the
// gradient, the allreduce or the optimizer, but of checkpoints (buffer_table() names its slices).
// Activations (and their gradients) are stored as dtype(): fp32, or bf16/fp16 with a 16-bit copy of the
// parameters that convolution and linear layers read (params16(), kept equal to params() rounded by
// sync_weight_copy); parameters, gradients and buffers stay fp32 (docs/mixed_precision.md).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/model/layers.h"
#include "src/model/scratch.h"

namespace cnn {

struct ParamInfo {
  std::string name;  // "<layer>.<param>", e.g. "conv1.weight"
  std::vector<int> shape;
  size_t offset = 0, size = 0;
  Init init = Init::kZero;
  int fan_in = 1;
  bool decay = true;
};

class Net {
 public:
  Net(Backend& be, const Dims& input, int num_classes);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Appends a layer whose input is the previous layer's output (the net's input for the first).
  void add(std::unique_ptr<Layer> layer);
  // Appends a layer reading the outputs of the named earlier layers, in order ("input": the net's input):
  // several inputs need a MultiInputLayer. The last layer's output is the net's; every other layer's output
  // must be read by a later one. Throws Error(kExitUsage) naming the layer and what is wrong.
  void add(std::unique_ptr<Layer> layer, const std::vector<std::string>& inputs);
  // Gives the parameter or buffer that build() would name `default_name` ("<layer>.<param>") the name `name`
  // instead (an imported model keeps its file's tensor names). Before build().
  void rename(const std::string& default_name, const std::string& name);
  // The inputs of layer i: indices of earlier layers, -1 for the net's input.
  const std::vector<int>& inputs_of(size_t i) const { return inputs_[i]; }
  // Lets a graph rewrite (src/model/graph_rewrite.h) replace the layers and their inputs (indices as inputs_of
  // says, each layer reading earlier ones only) before build().
  using GraphEdit = std::function<void(std::vector<std::unique_ptr<Layer>>&, std::vector<std::vector<int>>&)>;
  void edit_graph(const GraphEdit& edit);
  // Whether each layer reads the previous one's output only (the zoo's nets), else a graph.
  bool is_chain() const { return chain_; }
  // Activation recomputation (--train.recompute; docs/perf.md), before build(): "false" (or empty), "true"
  // (every residual block), or a comma-separated list of block names and name prefixes ending at a dot
  // ("layer3" is layer3.0, layer3.1, ...). Those blocks keep only their input and output between forward and
  // backward, their intermediates sharing one region sized for the largest; gradients and losses stay
  // bit-identical. build() throws Error(kExitUsage) for a name that matches no residual block.
  void set_recompute(const std::string& blocks);
  // The activation type; before build() (fp32 unless set).
  void set_dtype(DType t);
  DType dtype() const { return dt_; }
  // Fixes shapes, allocates the flat buffers and activations for up to max_n samples and initialises the
  // parameters from `seed` (He-normal weights, zero biases). Throws Error(kExitUsage) on shape problems.
  void build(int max_n, uint64_t seed);

  size_t num_params() const { return num_params_; }
  // Writable access to the parameters: it starts a new parameter version, as anything may change them
  // through the pointer (optimizer steps, checkpoint loads, broadcasts).
  float* params() {
    version_ = next_param_version();
    return params_;
  }
  const float* params() const { return params_; }
  // Names the current parameter values for Backend::set_param_version; unique across all nets of the process.
  uint64_t param_version() const { return version_; }
  // The 16-bit copy of params() (num_params values of dtype()); params() itself in an fp32 net.
  const void* params16() const { return params16_ ? params16_ : params_; }
  // params16 = params rounded, under a new parameter version. Call after anything writes params()
  // (initialisation, broadcast, optimizer update, checkpoint resume); nothing to do in an fp32 net.
  void sync_weight_copy();
  float* grads() { return grads_; }
  const std::vector<ParamInfo>& param_table() const { return table_; }
  size_t num_buffers() const { return num_buffers_; }
  float* buffers() { return buffers_; }
  const std::vector<ParamInfo>& buffer_table() const { return buffer_table_; }
  // Tells the layers about the batch the next forward() runs (dropout masks).
  void set_batch(const BatchContext& ctx);
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const Dims& input_dims() const { return input_; }
  Backend& backend() { return be_; }
  int num_classes() const { return classes_; }
  int max_batch() const { return max_n_; }

  // x: [n, H, W, C] fp32 device memory (converted to dtype() first in a 16-bit net); returns logits
  // [n, classes] of dtype().
  const void* forward(const float* x, int n, bool train);
  // dlogits: [n, classes] of dtype(). Accumulates into grads(); after each layer calls on_ready(offset)
  // meaning the gradient from `offset` to the end of the buffer is final.
  void backward(const void* dlogits, int n, const std::function<void(size_t)>& on_ready = nullptr);
  void zero_grads();
  // Fine-tuning (src/train/freeze.h): layers before `layer` hold frozen parameters only, so backward stops at
  // `layer` (no gradient below it is needed); with `eval`, their training forward runs as evaluation does
  // (batch norm on its running statistics, left as they are). 0: every layer trains (the default).
  void set_frozen_below(size_t layer, bool eval) {
    frozen_below_ = layer;
    frozen_eval_ = eval;
  }
  size_t frozen_below() const { return frozen_below_; }

  double flops_per_sample() const;  // forward
  // Bytes of activations, activation gradients and per-sample scratch (masks, argmax) allocated per sample:
  // what the batch size multiplies (after build()); the recomputing blocks' shared region counts once.
  size_t activation_bytes_per_sample() const;
  // Blocks that recompute (after build()).
  int recomputing_blocks() const { return recomputing_; }
  std::string summary() const;

 private:
  static uint64_t next_param_version();
  Dims setup_layer(size_t i);
  void allocate_graph_gradients();
  void backward_graph(const void* dlogits, int n, const std::function<void(size_t)>& on_ready);
  void mark_recomputing();
  void bind_and_allocate(int max_n);
  // A sequential net: the activation layouts between its layers (pick_layouts, Layer::set_layouts); NHWC at the
  // input and the logits.
  void pick_layouts(int max_n);

  Backend& be_;
  Dims input_;
  int classes_;
  int max_n_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::vector<int>> inputs_;  // per layer (see inputs_of)
  bool chain_ = true;
  std::map<std::string, std::string> renames_;
  std::vector<Dims> out_dims_;
  std::vector<size_t> first_param_;  // per layer: offset of its first parameter (or where it would be)
  DType dt_ = DType::kF32;
  std::vector<void*> acts_;         // per layer output (aliases for views)
  std::vector<void*> owned_;
  void* grad_buf_[2] = {nullptr, nullptr};  // a chain's activation gradients, alternating
  // A graph's: one per layer output (the last one's is dlogits), and one scratch per input slot for a gradient
  // that adds to one already there (an output read by several layers).
  std::vector<void*> out_grad_, add_scratch_;
  std::vector<char> has_grad_;
  void* input16_ = nullptr;         // the input converted to dtype() (16-bit nets)
  const void* input_ptr_ = nullptr;
  size_t act_bytes_ = 0;            // per sample, of the buffers above
  std::vector<ParamInfo> table_;
  size_t num_params_ = 0;
  float* params_ = nullptr;
  void* params16_ = nullptr;
  float* grads_ = nullptr;
  std::vector<ParamInfo> buffer_table_;
  size_t num_buffers_ = 0;
  float* buffers_ = nullptr;
  uint64_t version_ = 0;
  std::string recompute_ = "false";
  int recomputing_ = 0;
  std::unique_ptr<ScratchRegion> scratch_;  // shared by the recomputing blocks
  size_t frozen_below_ = 0;
  bool frozen_eval_ = false;
};

// Fills host buffer `out` (size num_params) with the initial values of `table` drawn from `seed`.
void init_params(const std::vector<ParamInfo>& table, uint64_t seed, float* out);

}  // namespace cnn
