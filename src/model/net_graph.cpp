// The parts of Net that only a graph needs (layers added with named inputs): shapes from several inputs,
// one gradient buffer per layer output, and backward in reverse layer order adding up the gradients of an
// output that several layers read. A chain (every zoo net) keeps its two alternating gradient buffers.
#include <algorithm>

#include "src/base/error.h"
#include "src/model/net.h"

namespace cnn {

Dims MultiInputLayer::setup(const Dims& in) { return setup_inputs({in}); }
void MultiInputLayer::forward(Backend& be, const void* x, void* y, int n, bool train) {
  forward_inputs(be, {x}, y, n, train);
}
void MultiInputLayer::backward(Backend& be, const void* x, const void* y, const void* dy, void* dx, int n) {
  backward_inputs(be, {x}, y, dy, {dx}, n);
}

namespace {

std::string dims_str(const Dims& d) { return strprintf("%dx%dx%d", d.h, d.w, d.c); }

}  // namespace

void Net::edit_graph(const GraphEdit& edit) {
  CNN_CHECK(max_n_ == 0, "edit_graph after build");
  edit(layers_, inputs_);
  CNN_CHECK(!layers_.empty() && layers_.size() == inputs_.size(), "graph edit left %zu layers, %zu input lists",
            layers_.size(), inputs_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    for (int j : inputs_[i]) CNN_CHECK(j >= -1 && j < static_cast<int>(i), "graph edit: layer %zu reads %d", i, j);
}

Dims Net::setup_layer(size_t i) {
  Layer& l = *layers_[i];
  std::vector<Dims> in;
  for (int j : inputs_[i]) in.push_back(j < 0 ? input_ : out_dims_[j]);
  if (auto* m = dynamic_cast<MultiInputLayer*>(&l)) return m->setup_inputs(in);
  CNN_CHECK(in.size() == 1, "layer '%s' has %zu inputs", l.name().c_str(), in.size());
  return l.setup(in[0]);
}

void Net::allocate_graph_gradients() {
  const size_t esize = dtype_size(dt_);
  std::vector<int> readers(layers_.size(), 0);
  size_t slots = 1, max_act = 1;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (int j : inputs_[i])
      if (j >= 0) ++readers[j];
    slots = std::max(slots, inputs_[i].size());
    max_act = std::max(max_act, out_dims_[i].size());
  }
  for (size_t j = 0; j + 1 < layers_.size(); ++j) {
    if (readers[j] == 0)
      raise(kExitUsage, "the output of layer '%s' (%s, %s) is read by no layer: only the last layer's output "
            "may be unused", layers_[j]->name().c_str(), layers_[j]->describe().c_str(),
            dims_str(out_dims_[j]).c_str());
    out_grad_.push_back(be_.alloc(esize * out_dims_[j].size() * max_n_));
    act_bytes_ += esize * out_dims_[j].size();
  }
  out_grad_.push_back(nullptr);  // the last layer's: dlogits
  for (size_t k = 0; k < slots; ++k) add_scratch_.push_back(be_.alloc(esize * max_act * max_n_));
  act_bytes_ += slots * esize * max_act;
  has_grad_.assign(layers_.size(), 0);
}

void Net::backward_graph(const void* dlogits, int n, const std::function<void(size_t)>& on_ready) {
  std::fill(has_grad_.begin(), has_grad_.end(), 0);
  const size_t esize = dtype_size(dt_);
  const auto out = [&](int j) { return j < 0 ? input_ptr_ : static_cast<const void*>(acts_[j]); };
  for (size_t i = layers_.size(); i-- > frozen_below_;) {
    const void* dy = i + 1 == layers_.size() ? dlogits : out_grad_[i];
    const std::vector<int>& in = inputs_[i];
    // Where each input's gradient goes: straight into the input's buffer if it is the first to arrive (the
    // layers that read an output come after it, so its own backward runs after all of theirs), else into a
    // scratch slot, added afterwards. Nothing needs the net input's gradient.
    std::vector<void*> dxs(in.size(), nullptr);
    std::vector<char> adds(in.size(), 0);
    for (size_t k = 0; k < in.size(); ++k) {
      const int j = in[k];
      if (j < static_cast<int>(frozen_below_)) continue;  // the net's input, or a frozen layer's output
      adds[k] = has_grad_[j];
      dxs[k] = adds[k] ? add_scratch_[k] : out_grad_[j];
      has_grad_[j] = 1;
    }
    Layer& l = *layers_[i];
    if (l.is_view()) {
      if (dxs[0]) be_.copy(dxs[0], dy, esize * out_dims_[i].size() * n);
    } else if (auto* m = dynamic_cast<MultiInputLayer*>(&l)) {
      std::vector<const void*> xs;
      for (int j : in) xs.push_back(out(j));
      m->backward_inputs(be_, xs, acts_[i], dy, dxs, n);
    } else {
      l.backward(be_, out(in[0]), acts_[i], dy, dxs[0], n);
    }
    for (size_t k = 0; k < in.size(); ++k)
      if (adds[k]) be_.axpy(dt_, out_dims_[in[k]].size() * n, 1.f, add_scratch_[k], out_grad_[in[k]]);
    if (on_ready) on_ready(first_param_[i]);
  }
}

}  // namespace cnn
