#include "src/model/onnx/onnx_import.h"

#include <algorithm>
#include <cfloat>
#include <set>

#include "src/base/error.h"

namespace cnn {

namespace {

// An activation of the graph: which layer makes it ("input": the net's input) and its per-sample shape.
// A flattened tensor keeps the shape it had before (`spatial`), for the Gemm that reads it.
struct Act {
  std::string layer;
  Dims dims;
  bool flat = false;
  Dims spatial;
};

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// All of v equal (square kernels, equal strides and pads): that value, else exit 2 naming the attribute.
int uniform(const OnnxNode& n, const std::vector<int64_t>& v, const char* what) {
  for (int64_t x : v)
    if (x != v[0])
      raise_node_error(n, "%s %s: cnntrain's convolutions and pools need the same value in every direction",
                       what, list(v).c_str());
  return v.empty() ? 0 : static_cast<int>(v[0]);
}

int out_size(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

// The padding of Conv node n as cnntrain's ConvOptions (pad before, extra_pad_h/w more after) for an input of
// in_h x in_w: explicit `pads` [top, left, bottom, right] or `auto_pad`. Exit 2 naming the node where the
// padding cannot be represented (more padding before than after, or different padding before rows and columns).
void conv_padding(const OnnxNode& n, int in_h, int in_w, ConvOptions& o) {
  const std::string autopad = attr_string(n, "auto_pad", "NOTSET");
  std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
  if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
    // ONNX: output ceil(in / stride), the total padding split evenly, the odd one after (UPPER) or before (LOWER).
    const int span = o.dilation * (o.kernel - 1) + 1;
    const int in[2] = {in_h, in_w};
    for (int d = 0; d < 2; ++d) {
      const int out = (in[d] + o.stride - 1) / o.stride;
      const int total = std::max(0, (out - 1) * o.stride + span - in[d]);
      const int small = total / 2, large = total - small;
      pads[d] = autopad == "SAME_UPPER" ? small : large;
      pads[d + 2] = autopad == "SAME_UPPER" ? large : small;
    }
  } else if (autopad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (autopad != "NOTSET") {
    raise_node_error(n, "auto_pad '%s' is not an ONNX value", autopad.c_str());
  }
  const std::string from = autopad == "NOTSET" ? "" : " (from auto_pad " + autopad + ")";
  if (pads.size() != 4) raise_node_error(n, "pads %s: a 2-d convolution has 4 pads", list(pads).c_str());
  if (pads[0] > pads[2] || pads[1] > pads[3])
    raise_node_error(n, "pads %s%s: more padding before the input than after it; cnntrain pads as much or more at "
                     "the end (pad the input explicitly, or use symmetric or SAME_UPPER padding)", list(pads).c_str(),
                     from.c_str());
  if (pads[0] != pads[1])
    raise_node_error(n, "pads %s%s: cnntrain needs the same padding before the rows and before the columns",
                     list(pads).c_str(), from.c_str());
  o.pad = static_cast<int>(pads[0]);
  o.extra_pad_h = static_cast<int>(pads[2] - pads[0]);
  o.extra_pad_w = static_cast<int>(pads[3] - pads[1]);
}

class Importer {
 public:
  Importer(const OnnxModel& m, Net& net, const BnOptions& bn) : m_(m), net_(net), bn_(bn) {}
  OnnxImport run();

 private:
  void input();
  void node(const OnnxNode& n);
  void conv(const OnnxNode& n);
  void batchnorm(const OnnxNode& n);
  void pool(const OnnxNode& n);
  void global_pool(const OnnxNode& n, bool keepdims);
  void flatten(const OnnxNode& n);
  void linear(const OnnxNode& n, const OnnxTensor& w, bool transposed, const OnnxTensor* bias,
              const std::string& out);
  void gemm(const OnnxNode& n);
  void matmul(const OnnxNode& n);
  void add(const OnnxNode& n);
  void activation(const OnnxNode& n);
  void join(const OnnxNode& n);
  float clip_bound(const OnnxNode& n, size_t k, float def) const;
  void cast(const OnnxNode& n);
  // An initializer, Constant or folded Cast by name; nullptr if there is none.
  const OnnxTensor* constant(const std::string& name) const;
  void dropout(const OnnxNode& n);
  const Act& act(const OnnxNode& n, size_t k) const;
  const OnnxTensor& tensor(const OnnxNode& n, size_t k) const;
  const OnnxTensor* optional_tensor(const OnnxNode& n, size_t k) const;
  std::string layer_name(const OnnxNode& n, const std::string& weight);
  // Adds l reading the layers `in`; its output is the node's first output (or `out_name`), of shape `out`.
  void emit(const OnnxNode& n, std::unique_ptr<Layer> l, const std::vector<std::string>& in, Act out,
            const std::string& out_name = "");
  // Names the layer's tensor `param` after the file's `t`, whose values (converted) it starts from.
  void take(const std::string& layer, const char* param, const OnnxTensor& t, std::vector<float> v);

  const OnnxModel& m_;
  Net& net_;
  BnOptions bn_;
  OnnxImport r_;
  std::map<std::string, Act> acts_;
  std::map<std::string, std::vector<size_t>> readers_;  // tensor -> nodes reading it
  std::set<std::string> names_, folded_;                // layer names in use; Add nodes folded into a MatMul
  std::map<std::string, OnnxTensor> casts_;             // Cast nodes of constants, folded
  std::string last_;
};

OnnxImport Importer::run() {
  for (size_t i = 0; i < m_.nodes.size(); ++i)
    for (const std::string& in : m_.nodes[i].inputs) readers_[in].push_back(i);
  input();
  bool any_bn = false;
  for (const OnnxNode& n : m_.nodes) {
    any_bn = any_bn || n.op_type == "BatchNormalization";
    if (!folded_.count(n.name)) node(n);
  }
  r_.batchnorm_folded = !any_bn;
  if (m_.outputs.size() != 1)
    raise(kExitUsage, "%s: the graph has %zu outputs; cnntrain trains a classifier with one output (the logits)",
          m_.path.c_str(), m_.outputs.size());
  auto out = acts_.find(m_.outputs[0].name);
  if (out == acts_.end() || out->second.layer != last_)
    raise(kExitUsage, "%s: the graph output '%s' is not made by the graph's last node", m_.path.c_str(),
          m_.outputs[0].name.c_str());
  if (out->second.dims.size() != static_cast<size_t>(net_.num_classes()))
    raise(kExitUsage, "%s: the graph output '%s' has %zu values per sample, but the dataset has %d classes: "
          "export the model with a classifier for %d classes", m_.path.c_str(), m_.outputs[0].name.c_str(),
          out->second.dims.size(), net_.num_classes(), net_.num_classes());
  return std::move(r_);
}

void Importer::input() {
  if (m_.inputs.size() != 1)
    raise(kExitUsage, "%s: the graph has %zu inputs; cnntrain feeds one image batch", m_.path.c_str(),
          m_.inputs.size());
  const OnnxValueInfo& in = m_.inputs[0];
  const Dims& d = net_.input_dims();
  const std::vector<int64_t> want = {d.c, d.h, d.w};
  bool fits = in.dims.size() == 4;
  for (size_t i = 0; fits && i < 3; ++i) fits = in.dims[i + 1] < 0 || in.dims[i + 1] == want[i];
  if (!fits)
    raise(kExitUsage, "%s: the model's input '%s' is %s (N,C,H,W) but the dataset's images are %dx%dx%d (CxHxW): "
          "export the model for this image size and channel count, or resize the data (--data.image_size)",
          m_.path.c_str(), in.name.c_str(), list(in.dims).c_str(), d.c, d.h, d.w);
  acts_[in.name] = Act{"input", d, false, Dims{}};
}

const Act& Importer::act(const OnnxNode& n, size_t k) const {
  if (k >= n.inputs.size() || n.inputs[k].empty()) raise_node_error(n, "input %zu is missing", k);
  auto it = acts_.find(n.inputs[k]);
  if (it == acts_.end()) {
    if (constant(n.inputs[k]))
      raise_node_error(n, "input '%s' is a constant tensor where cnntrain needs an activation",
                       n.inputs[k].c_str());
    raise_node_error(n, "input '%s' is made by no node before it", n.inputs[k].c_str());
  }
  return it->second;
}

const OnnxTensor* Importer::optional_tensor(const OnnxNode& n, size_t k) const {
  if (k >= n.inputs.size() || n.inputs[k].empty()) return nullptr;
  const OnnxTensor* t = constant(n.inputs[k]);
  if (!t)
    raise_node_error(n, "input '%s' must be an initializer or a Constant (cnntrain trains it as a parameter)",
                     n.inputs[k].c_str());
  if (!t->is_float()) raise_node_error(n, "input '%s' holds integers where weights are expected", t->name.c_str());
  return t;
}

const OnnxTensor& Importer::tensor(const OnnxNode& n, size_t k) const {
  const OnnxTensor* t = optional_tensor(n, k);
  if (!t) raise_node_error(n, "input %zu (a weight tensor) is missing", k);
  return *t;
}

// "features.0.0.weight" -> "features.0.0"; else the node's name; unique either way.
std::string Importer::layer_name(const OnnxNode& n, const std::string& weight) {
  std::string base = n.name;
  const std::string suffix = ".weight";
  if (weight.size() > suffix.size() && weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0)
    base = weight.substr(0, weight.size() - suffix.size());
  std::string name = base;
  for (int k = 2; names_.count(name) || name == "input"; ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

void Importer::emit(const OnnxNode& n, std::unique_ptr<Layer> l, const std::vector<std::string>& in, Act out,
                    const std::string& out_name) {
  out.layer = l->name();
  last_ = out.layer;
  net_.add(std::move(l), in);
  if (n.outputs.empty()) raise_node_error(n, "the node has no output");
  acts_[out_name.empty() ? n.outputs[0] : out_name] = out;
}

void Importer::take(const std::string& layer, const char* param, const OnnxTensor& t, std::vector<float> v) {
  net_.rename(layer + "." + param, t.name);
  r_.values[t.name] = std::move(v);
}

void Importer::node(const OnnxNode& n) {
  const std::string& op = n.op_type;
  if (op == "Conv") return conv(n);
  if (op == "BatchNormalization") return batchnorm(n);
  if (op == "MaxPool" || op == "AveragePool") return pool(n);
  if (op == "GlobalAveragePool") return global_pool(n, true);
  if (op == "ReduceMean") {
    std::vector<int64_t> axes = attr_ints(n, "axes", {});
    if (axes.empty() && n.inputs.size() > 1 && !n.inputs[1].empty()) {  // opset 18: axes as an input
      const OnnxTensor* t = constant(n.inputs[1]);
      if (!t || t->is_float()) raise_node_error(n, "axes must be a constant integer tensor");
      axes = t->ints;
    }
    for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3})
      raise_node_error(n, "ReduceMean over axes %s: cnntrain supports the mean over H and W (axes [2,3]) only",
                       list(axes).c_str());
    return global_pool(n, attr_int(n, "keepdims", 1) != 0);
  }
  if (op == "Relu") {
    const Act& x = act(n, 0);
    return emit(n, make_relu(layer_name(n, "")), {x.layer}, x);
  }
  if (op == "LeakyRelu" || op == "Clip" || op == "Sigmoid" || op == "HardSigmoid" || op == "HardSwish")
    return activation(n);
  if (op == "Mul" || op == "Concat") return join(n);
  if (op == "Flatten" || op == "Reshape") return flatten(n);
  if (op == "Gemm") return gemm(n);
  if (op == "MatMul") return matmul(n);
  if (op == "Add") return add(n);
  if (op == "Dropout") return dropout(n);
  if (op == "Cast") return cast(n);
  if (op == "Identity") {
    acts_[n.outputs.at(0)] = act(n, 0);
    return;
  }
  raise_node_error(n, "this version of cnntrain reads the op but cannot build it yet; the ops it builds are "
                   "Conv, BatchNormalization, Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, "
                   "MaxPool, AveragePool, GlobalAveragePool, ReduceMean (H,W), Flatten, Reshape ([N,-1]), Gemm, "
                   "MatMul (+Add), Add, Mul, Concat (channels), Dropout, Identity");
}

void Importer::conv(const OnnxNode& n) {
  check_attrs_known(n, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  const Act& x = act(n, 0);
  if (x.flat) raise_node_error(n, "the input is flattened; a convolution needs an image");
  const OnnxTensor& w = tensor(n, 1);
  const OnnxTensor* b = optional_tensor(n, 2);
  if (w.dims.size() != 4) raise_node_error(n, "weight '%s' is %s, not [K,C,R,S]", w.name.c_str(), list(w.dims).c_str());
  const int k = static_cast<int>(w.dims[0]), c = static_cast<int>(w.dims[1]);
  ConvOptions o;
  o.kernel = uniform(n, {w.dims[2], w.dims[3]}, "kernel");
  const int64_t groups = attr_int(n, "group", 1);
  if (groups < 1 || x.dims.c % groups != 0 || k % groups != 0 || c * groups != x.dims.c)
    raise_node_error(n, "weight '%s' %s with group %lld does not fit an input of %d channels (a grouped "
                     "convolution's weight is [K, C/group, R, S], group dividing C and K)", w.name.c_str(),
                     list(w.dims).c_str(), static_cast<long long>(groups), x.dims.c);
  o.groups = static_cast<int>(groups);
  o.dilation = uniform(n, attr_ints(n, "dilations", {1, 1}), "dilations");
  o.stride = uniform(n, attr_ints(n, "strides", {1, 1}), "strides");
  o.bias = b != nullptr;
  if (o.dilation < 1 || o.stride < 1) raise_node_error(n, "strides and dilations must be positive");
  conv_padding(n, x.dims.h, x.dims.w, o);
  const std::string name = layer_name(n, w.name);
  // OIHW -> KRSC (C: the input channels of one group)
  const int r = o.kernel;
  std::vector<float> v(w.floats.size());
  for (int f = 0; f < k; ++f)
    for (int i = 0; i < c; ++i)
      for (int y = 0; y < r; ++y)
        for (int z = 0; z < r; ++z) v[((f * r + y) * r + z) * c + i] = w.floats[((f * c + i) * r + y) * r + z];
  take(name, "weight", w, std::move(v));
  if (b) take(name, "bias", *b, b->floats);
  const int span = o.dilation * (r - 1) + 1;
  const Dims out{out_size(x.dims.h + o.extra_pad_h, span, o.stride, o.pad),
                 out_size(x.dims.w + o.extra_pad_w, span, o.stride, o.pad), k};
  if (out.h <= 0 || out.w <= 0) raise_node_error(n, "the output would be empty (input %dx%d)", x.dims.h, x.dims.w);
  emit(n, make_conv2d(name, k, o), {x.layer}, Act{"", out, false, Dims{}});
}

void Importer::batchnorm(const OnnxNode& n) {
  check_attrs_known(n, {"epsilon", "momentum", "training_mode", "spatial"});
  const Act& x = act(n, 0);
  const OnnxTensor &g = tensor(n, 1), &b = tensor(n, 2), &mean = tensor(n, 3), &var = tensor(n, 4);
  for (const OnnxTensor* t : {&g, &b, &mean, &var})
    if (t->numel() != x.dims.c)
      raise_node_error(n, "'%s' has %lld values for %d channels", t->name.c_str(),
                       static_cast<long long>(t->numel()), x.dims.c);
  BnOptions o = bn_;
  o.eps = attr_float(n, "epsilon", 1e-5f);
  o.momentum = 1.f - attr_float(n, "momentum", 0.9f);  // ONNX: running = momentum * running + (1-momentum) * batch
  const std::string name = layer_name(n, g.name);
  take(name, "weight", g, g.floats);
  take(name, "bias", b, b.floats);
  take(name, "running_mean", mean, mean.floats);
  take(name, "running_var", var, var.floats);
  emit(n, make_batchnorm(name, o), {x.layer}, x);
}

void Importer::pool(const OnnxNode& n) {
  const bool max = n.op_type == "MaxPool";
  check_attrs_known(n, {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations", "storage_order",
                        "count_include_pad"});
  const Act& x = act(n, 0);
  const int k = uniform(n, attr_ints_required(n, "kernel_shape"), "kernel_shape");
  const int s = uniform(n, attr_ints(n, "strides", {1, 1}), "strides");
  const int p = uniform(n, attr_ints(n, "pads", {0, 0, 0, 0}), "pads");
  if (attr_int(n, "ceil_mode", 0) != 0)
    raise_node_error(n, "ceil_mode 1 is not supported (export with ceil_mode=False)");
  if (attr_string(n, "auto_pad", "NOTSET") != "NOTSET") raise_node_error(n, "auto_pad is not supported for pooling");
  if (!max && p > 0 && attr_int(n, "count_include_pad", 0) != 0)
    raise_node_error(n, "count_include_pad 1 with padding: cnntrain's average pooling leaves padding out of the count");
  const std::string name = layer_name(n, "");
  const Dims out{out_size(x.dims.h, k, s, p), out_size(x.dims.w, k, s, p), x.dims.c};
  emit(n, max ? make_maxpool(name, k, s, p) : make_avgpool(name, k, s, p), {x.layer}, Act{"", out, false, Dims{}});
}

void Importer::global_pool(const OnnxNode& n, bool keepdims) {
  const Act& x = act(n, 0);
  Act out{"", Dims{1, 1, x.dims.c}, false, Dims{}};
  out.flat = !keepdims;
  out.spatial = out.dims;
  emit(n, make_global_avgpool(layer_name(n, "")), {x.layer}, out);
}

// Flatten (axis 1) and Reshape to [N,-1]: a view of NHWC memory; the next Gemm reorders its columns.
void Importer::flatten(const OnnxNode& n) {
  const Act& x = act(n, 0);
  if (n.op_type == "Flatten" && attr_int(n, "axis", 1) != 1)
    raise_node_error(n, "axis %lld: cnntrain flattens from axis 1 only",
                     static_cast<long long>(attr_int(n, "axis", 1)));
  if (n.op_type == "Reshape") {
    const OnnxTensor* shape = constant(n.inputs.size() > 1 ? n.inputs[1] : "");
    const bool to_2d = shape && !shape->is_float() && shape->ints.size() == 2 &&
                       (shape->ints[1] == -1 || shape->ints[1] == static_cast<int64_t>(x.dims.size())) &&
                       (shape->ints[0] == 0 || shape->ints[0] == -1 || shape->ints[0] >= 1);
    if (!to_2d) raise_node_error(n, "cnntrain supports Reshape to [N,-1] (flattening) only");
  }
  if (x.flat) {
    acts_[n.outputs.at(0)] = x;
    return;
  }
  Act out{"", Dims{1, 1, static_cast<int>(x.dims.size())}, true, x.dims};
  emit(n, make_flatten(layer_name(n, "")), {x.layer}, out);
}

// A fully connected layer from weight w ([out,in], or [in,out] when not `transposed`): columns reordered from
// ONNX's C,H,W flattening to cnntrain's H,W,C when the input was a flattened map.
void Importer::linear(const OnnxNode& n, const OnnxTensor& w, bool transposed, const OnnxTensor* bias,
                      const std::string& out_name) {
  const Act& x = act(n, 0);
  if (w.dims.size() != 2) raise_node_error(n, "weight '%s' is %s, not a matrix", w.name.c_str(), list(w.dims).c_str());
  const int in = static_cast<int>(transposed ? w.dims[1] : w.dims[0]);
  const int out = static_cast<int>(transposed ? w.dims[0] : w.dims[1]);
  if (static_cast<size_t>(in) != x.dims.size())
    raise_node_error(n, "weight '%s' expects %d inputs but the input has %zu values per sample", w.name.c_str(), in,
                     x.dims.size());
  const Dims sp = x.flat ? x.spatial : x.dims;
  std::vector<float> v(static_cast<size_t>(in) * out);
  for (int o = 0; o < out; ++o)
    for (int y = 0; y < sp.h; ++y)
      for (int z = 0; z < sp.w; ++z)
        for (int c = 0; c < sp.c; ++c) {
          const size_t ours = (static_cast<size_t>(y) * sp.w + z) * sp.c + c;
          const size_t theirs = (static_cast<size_t>(c) * sp.h + y) * sp.w + z;
          v[static_cast<size_t>(o) * in + ours] =
              transposed ? w.floats[static_cast<size_t>(o) * in + theirs] : w.floats[theirs * out + o];
        }
  const std::string name = layer_name(n, w.name);
  take(name, "weight", w, std::move(v));
  if (bias) {
    if (bias->numel() != out)
      raise_node_error(n, "bias '%s' has %lld values for %d outputs", bias->name.c_str(),
                       static_cast<long long>(bias->numel()), out);
    take(name, "bias", *bias, bias->floats);
  }
  emit(n, make_linear(name, out, bias != nullptr), {x.layer}, Act{"", Dims{1, 1, out}, true, Dims{1, 1, out}},
       out_name);
}

void Importer::gemm(const OnnxNode& n) {
  check_attrs_known(n, {"alpha", "beta", "transA", "transB"});
  if (attr_int(n, "transA", 0) != 0 || attr_float(n, "alpha", 1.f) != 1.f || attr_float(n, "beta", 1.f) != 1.f)
    raise_node_error(n, "cnntrain builds Gemm with transA 0, alpha 1 and beta 1 (what nn.Linear exports)");
  linear(n, tensor(n, 1), attr_int(n, "transB", 0) != 0, optional_tensor(n, 2), n.outputs.at(0));
}

// MatMul by a constant [in,out] matrix; an Add of a constant vector that alone reads it is its bias.
void Importer::matmul(const OnnxNode& n) {
  const OnnxTensor& w = tensor(n, 1);
  const OnnxTensor* bias = nullptr;
  std::string out = n.outputs.at(0);
  const auto& rd = readers_[out];
  if (rd.size() == 1 && m_.nodes[rd[0]].op_type == "Add") {
    const OnnxNode& a = m_.nodes[rd[0]];
    const std::string other = a.inputs.size() == 2 ? (a.inputs[0] == out ? a.inputs[1] : a.inputs[0]) : "";
    const OnnxTensor* t = constant(other);
    if (t && t->is_float() && w.dims.size() == 2 && t->numel() == w.dims[1]) {
      bias = t;
      out = a.outputs.at(0);
      folded_.insert(a.name);
    }
  }
  linear(n, w, false, bias, out);
}

void Importer::add(const OnnxNode& n) {
  if (n.inputs.size() != 2) raise_node_error(n, "Add needs two inputs");
  const Act &a = act(n, 0), &b = act(n, 1);
  if (!(a.dims == b.dims))
    raise_node_error(n, "adds shapes %dx%dx%d and %dx%dx%d (HxWxC): cnntrain adds equal shapes", a.dims.h, a.dims.w,
                     a.dims.c, b.dims.h, b.dims.w, b.dims.c);
  emit(n, make_add(layer_name(n, "")), {a.layer, b.layer}, a);
}

const OnnxTensor* Importer::constant(const std::string& name) const {
  if (const OnnxTensor* t = m_.find_tensor(name)) return t;
  auto it = casts_.find(name);
  return it == casts_.end() ? nullptr : &it->second;
}

// Cast of a constant: folded (to float or to an integer type); of an activation: refused.
void Importer::cast(const OnnxNode& n) {
  const OnnxTensor* t = n.inputs.empty() ? nullptr : constant(n.inputs[0]);
  if (!t) raise_node_error(n, "cnntrain folds Cast of constants only; this one casts an activation");
  const int64_t to = attr_int(n, "to", 1);
  OnnxTensor c = *t;
  c.name = n.outputs.at(0);
  const bool to_float = to == 1 || to == 10 || to == 11 || to == 16;  // float, float16, double, bfloat16
  if (to_float && !c.is_float()) c.floats.assign(c.ints.begin(), c.ints.end());
  if (!to_float && c.is_float())
    for (float f : c.floats) c.ints.push_back(static_cast<int64_t>(f));
  c.kind = to_float ? OnnxTensor::Kind::kFloat : OnnxTensor::Kind::kInt;
  c.source_type = static_cast<int>(to);
  casts_[c.name] = std::move(c);
}

// Clip's bound k (opset >= 11: an optional input, a Constant or initializer scalar).
float Importer::clip_bound(const OnnxNode& n, size_t k, float def) const {
  if (k >= n.inputs.size() || n.inputs[k].empty()) return def;
  const OnnxTensor* t = constant(n.inputs[k]);
  if (!t || t->numel() != 1) raise_node_error(n, "bound '%s' must be a constant scalar", n.inputs[k].c_str());
  return t->is_float() ? t->floats[0] : static_cast<float>(t->ints[0]);
}

void Importer::activation(const OnnxNode& n) {
  const Act& x = act(n, 0);
  const std::string& op = n.op_type;
  Activation a;
  if (op == "LeakyRelu") a = {ActKind::kLeakyRelu, attr_float(n, "alpha", 0.01f), 0.f};
  if (op == "Clip") a = {ActKind::kClip, clip_bound(n, 1, -FLT_MAX), clip_bound(n, 2, FLT_MAX)};
  if (op == "Sigmoid") a = {ActKind::kSigmoid, 0.f, 0.f};
  if (op == "HardSigmoid") a = {ActKind::kHardSigmoid, attr_float(n, "alpha", 0.2f), attr_float(n, "beta", 0.5f)};
  if (op == "HardSwish") a = {ActKind::kHardSwish, 0.f, 0.f};
  if (op == "Clip" && a.alpha > a.beta) raise_node_error(n, "min %g is above max %g", a.alpha, a.beta);
  emit(n, make_activation(layer_name(n, ""), a), {x.layer}, x);
}

// Mul (equal shapes, or the [N,C,1,1] per-channel scaling of squeeze-excitation) and Concat along channels.
void Importer::join(const OnnxNode& n) {
  std::vector<std::string> in;
  std::vector<Act> xs;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    xs.push_back(act(n, k));
    if (xs.back().flat && !(xs.back().dims == Dims{1, 1, xs.back().dims.c}))
      raise_node_error(n, "input '%s' is flattened; cnntrain joins images", n.inputs[k].c_str());
    in.push_back(xs.back().layer);
  }
  if (n.op_type == "Mul") {
    if (xs.size() != 2) raise_node_error(n, "Mul needs two inputs");
    const Act& big = xs[0].dims.size() >= xs[1].dims.size() ? xs[0] : xs[1];
    return emit(n, make_mul(layer_name(n, "")), in, big);
  }
  const int64_t axis = attr_int(n, "axis", 1);
  if (axis != 1 && axis != -3)
    raise_node_error(n, "axis %lld: cnntrain concatenates along the channels (axis 1) only",
                     static_cast<long long>(axis));
  Act out = xs[0];
  out.dims.c = 0;
  for (const Act& x : xs) {
    if (x.dims.h != out.dims.h || x.dims.w != out.dims.w)
      raise_node_error(n, "inputs of %dx%d and %dx%d pixels: a channel concatenation needs equal sizes", out.dims.h,
                       out.dims.w, x.dims.h, x.dims.w);
    out.dims.c += x.dims.c;
  }
  emit(n, make_concat(layer_name(n, "")), in, out);
}

void Importer::dropout(const OnnxNode& n) {
  const Act& x = act(n, 0);
  float p = attr_float(n, "ratio", 0.5f);  // opset < 12
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const OnnxTensor* t = constant(n.inputs[1]);
    if (!t || !t->is_float() || t->numel() != 1) raise_node_error(n, "ratio must be a constant scalar");
    p = t->floats[0];
  }
  if (n.outputs.size() > 1 && !n.outputs[1].empty() && !readers_[n.outputs[1]].empty())
    raise_node_error(n, "the dropout mask output is read by another node; cnntrain does not expose it");
  emit(n, make_dropout(layer_name(n, ""), p), {x.layer}, x);
}

}  // namespace

OnnxImport import_onnx(const OnnxModel& model, Net& net, const BnOptions& bn) {
  return Importer(model, net, bn).run();
}

void load_onnx_values(const OnnxImport& imp, Net& net) {
  std::vector<float> host(net.num_params()), host_b(net.num_buffers());
  const auto fill = [&](const std::vector<ParamInfo>& table, std::vector<float>& dst) {
    for (const ParamInfo& p : table) {
      auto it = imp.values.find(p.name);
      CNN_CHECK(it != imp.values.end() && it->second.size() == p.size, "imported '%s': %zu values for %zu",
                p.name.c_str(), it == imp.values.end() ? size_t{0} : it->second.size(), p.size);
      std::copy(it->second.begin(), it->second.end(), dst.begin() + static_cast<std::ptrdiff_t>(p.offset));
    }
  };
  fill(net.param_table(), host);
  fill(net.buffer_table(), host_b);
  net.backend().upload(net.params(), host.data(), sizeof(float) * host.size());
  net.backend().upload(net.buffers(), host_b.data(), sizeof(float) * host_b.size());
  net.sync_weight_copy();
}

}  // namespace cnn
