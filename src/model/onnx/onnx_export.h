// ONNX export: a built Net as a standard ONNX graph for inference (opset 17; what `cnntrain-data export
// --format onnx` writes, docs/models.md "Exporting to ONNX"). Every layer describes its own nodes
// (Layer::export_onnx): fused layers expand into standard ones (batch norm + ReLU into BatchNormalization and
// Relu, a residual block into its convolutions, batch norms, shortcut, Add and Relu), dropout disappears, and
// layouts convert back: KRSC filters to OIHW, NHWC maps to NCHW, and a linear layer that reads a flattened map
// gets its weight columns reordered from cnntrain's (h,w,c) to ONNX's (c,h,w) order. Initializers are named
// after the parameters and buffers (Net::param_table: the zoo's names, an imported file's own).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/model/onnx/onnx_model.h"

namespace cnn {

// A tensor of the exported graph: [N, C, H, W] for a map of per-sample shape `dims`; with `flat`, that map
// flattened to [N, C*H*W] in ONNX's (c,h,w) order (after Flatten or Gemm, whose output is a 1x1xK map).
struct OnnxValue {
  std::string name;
  Dims dims;
  bool flat = false;
};

// A layer's parameters or buffers: final name, shape (cnntrain's layout) and host values.
struct OnnxWeight {
  std::string name;
  std::vector<int> shape;
  const float* data = nullptr;
};
struct OnnxWeights {
  std::vector<OnnxWeight> params, buffers;
  // `np` parameters from p0 and `nb` buffers from b0: a composite's part.
  OnnxWeights slice(size_t p0, size_t np, size_t b0, size_t nb) const;
};

// Collects the nodes, initializers and constants of the exported model. Names: a layer's output is named
// after the layer (prefixed by the composites it sits in, see Scope), its intermediates "<output>/<what>".
class OnnxBuilder {
 public:
  explicit OnnxBuilder(OnnxModel& m) : m_(m) {}
  // Adds a node of type `op` whose output is named `out` under the current scope (made unique); returns it.
  std::string node(const std::string& op, const std::string& out, const std::vector<std::string>& inputs,
                   const std::map<std::string, OnnxAttr>& attrs = {});
  // A float initializer named `name` (a parameter or buffer name, unscoped).
  void initializer(const std::string& name, const std::vector<int64_t>& dims, std::vector<float> values);
  // Constant nodes: an int64 vector, a float scalar; returns the name.
  std::string ints(const std::string& name, const std::vector<int64_t>& v);
  std::string scalar(const std::string& name, float v);
  // The value as [N,C,H,W] (a flattened one reshaped back) or as [N,C*H*W] (Flatten); `out` names the node.
  std::string map(const OnnxValue& v, const std::string& out);
  std::string flat(const OnnxValue& v, const std::string& out);

  // Layer names inside a composite are relative ("conv1" of block "layer1.0"): a Scope prefixes the names of
  // the nodes added while it lives.
  class Scope {
   public:
    Scope(OnnxBuilder& b, const std::string& prefix) : b_(b), saved_(b.prefix_) { b_.prefix_ += prefix; }
    ~Scope() { b_.prefix_ = saved_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OnnxBuilder& b_;
    std::string saved_;
  };

  static OnnxAttr attr(int64_t v);
  static OnnxAttr attr(float v);
  static OnnxAttr attr(const std::vector<int64_t>& v);

 private:
  std::string unique(const std::string& name);

  OnnxModel& m_;
  std::string prefix_;
  std::set<std::string> used_;
};

// `net` (built) as an ONNX model for inference: input "input" [N,C,H,W] float (N dynamic), output "logits"
// [N, classes]; `params` and `buffers` are host copies of net.params()/net.buffers() (the values exported).
// Throws Error(kExitUsage) naming a layer that cannot be exported.
OnnxModel export_onnx(const Net& net, const float* params, const float* buffers);

}  // namespace cnn
