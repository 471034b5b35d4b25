#include "src/model/net.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>

#include "kernels/rng.h"
#include "src/base/error.h"

namespace cnn {

Net::Net(Backend& be, const Dims& input, int num_classes) : be_(be), input_(input), classes_(num_classes) {}

Net::~Net() {
  layers_.clear();  // layers release their scratch through the backend first
  for (void* p : owned_) be_.release(p);
  be_.release(grad_buf_[0]);
  be_.release(grad_buf_[1]);
  for (void* p : out_grad_) be_.release(p);
  for (void* p : add_scratch_) be_.release(p);
  be_.release(input16_);
  be_.release(params16_);
  be_.release(params_);
  be_.release(grads_);
  be_.release(buffers_);
}

namespace {

// The parameter version the backend may rely on, for the length of one pass (0 again afterwards, so direct
// op calls between passes, e.g. from tests that perturb weights in place, never see stale derived data).
class ParamVersionScope {
 public:
  ParamVersionScope(Backend& be, uint64_t version) : be_(be) { be_.set_param_version(version); }
  ~ParamVersionScope() { be_.set_param_version(0); }
  ParamVersionScope(const ParamVersionScope&) = delete;
  ParamVersionScope& operator=(const ParamVersionScope&) = delete;

 private:
  Backend& be_;
};

}  // namespace

uint64_t Net::next_param_version() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

void Net::add(std::unique_ptr<Layer> layer) {
  inputs_.push_back({static_cast<int>(layers_.size()) - 1});
  layers_.push_back(std::move(layer));
}

void Net::add(std::unique_ptr<Layer> layer, const std::vector<std::string>& inputs) {
  CNN_CHECK(max_n_ == 0, "add after build");
  const std::string& name = layer->name();
  if (inputs.empty()) raise(kExitUsage, "layer '%s' reads no input", name.c_str());
  if (inputs.size() > 1 && !dynamic_cast<MultiInputLayer*>(layer.get()))
    raise(kExitUsage, "layer '%s' (%s) takes one input, not %zu", name.c_str(), layer->describe().c_str(),
          inputs.size());
  std::vector<int> idx;
  for (const std::string& in : inputs) {
    if (in == "input") {
      idx.push_back(-1);
      continue;
    }
    int found = -1;
    for (size_t j = 0; j < layers_.size(); ++j)
      if (layers_[j]->name() == in) found = static_cast<int>(j);
    if (found < 0)
      raise(kExitUsage, "layer '%s' reads '%s', which is no earlier layer (layers are added in topological "
            "order; 'input' is the net's input)", name.c_str(), in.c_str());
    idx.push_back(found);
  }
  for (const auto& l : layers_)
    if (l->name() == name) raise(kExitUsage, "two layers are named '%s'", name.c_str());
  inputs_.push_back(std::move(idx));
  layers_.push_back(std::move(layer));
}

void Net::rename(const std::string& default_name, const std::string& name) {
  CNN_CHECK(max_n_ == 0, "rename after build");
  renames_[default_name] = name;
}

void Net::set_recompute(const std::string& blocks) {
  CNN_CHECK(max_n_ == 0, "set_recompute after build");
  recompute_ = blocks;
}

void Net::mark_recomputing() {
  if (recompute_ == "false" || recompute_.empty()) return;
  scratch_ = std::make_unique<ScratchRegion>();
  std::vector<std::string> names;
  if (recompute_ != "true") {
    std::stringstream ss(recompute_);
    for (std::string item; std::getline(ss, item, ',');) names.push_back(item);
  }
  std::vector<bool> used(names.size(), false);
  for (auto& l : layers_) {
    bool match = names.empty();
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string& p = names[k];
      if (l->name() == p || l->name().compare(0, p.size() + 1, p + ".") == 0) match = used[k] = true;
    }
    if (!match) continue;
    if (l->make_recomputing(*scratch_)) {
      ++recomputing_;
    } else if (!names.empty()) {
      raise(kExitUsage, "option --train.recompute: layer %s is not a residual block (only residual blocks "
            "recompute their activations)", l->name().c_str());
    }
  }
  for (size_t k = 0; k < names.size(); ++k)
    if (!used[k])
      raise(kExitUsage, "option --train.recompute: '%s' names no block of this model (give block names such as "
            "layer3.1, prefixes such as layer3, true or false)", names[k].c_str());
}

void Net::set_dtype(DType t) {
  CNN_CHECK(max_n_ == 0, "set_dtype after build");
  dt_ = t;
}

void Net::sync_weight_copy() {
  if (!params16_) return;
  // The layers' 16-bit filters change: backends must not reuse what they derived from the old ones.
  version_ = next_param_version();
  be_.convert(num_params_, DType::kF32, params_, dt_, params16_);
}

void Net::build(int max_n, uint64_t seed) {
  CNN_CHECK(max_n > 0 && !layers_.empty(), "build(%d) of a net with %zu layers", max_n, layers_.size());
  const auto final_name = [&](const std::string& n) {
    auto it = renames_.find(n);
    return it == renames_.end() ? n : it->second;
  };
  max_n_ = max_n;
  Dims d = input_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    chain_ = chain_ && inputs_[i] == std::vector<int>{static_cast<int>(i) - 1};
    const auto& l = layers_[i];
    l->set_dtype(dt_);
    d = setup_layer(i);
    out_dims_.push_back(d);
    first_param_.push_back(num_params_);
    for (const ParamSpec& s : l->param_specs()) {
      ParamInfo p{final_name(l->name() + "." + s.name), s.shape, num_params_, s.size(), s.init, s.fan_in, s.decay};
      num_params_ += p.size;
      table_.push_back(p);
    }
    for (const ParamSpec& s : l->buffer_specs()) {
      ParamInfo b{final_name(l->name() + "." + s.name), s.shape, num_buffers_, s.size(), s.init, s.fan_in, false};
      num_buffers_ += b.size;
      buffer_table_.push_back(b);
    }
  }
  if (d.size() != static_cast<size_t>(classes_))
    raise(kExitUsage, "the model ends in %zu outputs but the dataset has %d classes", d.size(), classes_);
  mark_recomputing();
  params_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(num_params_, 1)));
  grads_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(num_params_, 1)));
  std::vector<float> host(num_params_);
  init_params(table_, seed, host.data());
  be_.upload(params(), host.data(), sizeof(float) * num_params_);
  if (dt_ != DType::kF32) {
    params16_ = be_.alloc(dtype_size(dt_) * std::max<size_t>(num_params_, 1));
    sync_weight_copy();
  }
  zero_grads();
  buffers_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(num_buffers_, 1)));
  std::vector<float> host_buf(num_buffers_);
  init_params(buffer_table_, seed, host_buf.data());
  be_.upload(buffers_, host_buf.data(), sizeof(float) * num_buffers_);
  bind_and_allocate(max_n);
}

void Net::pick_layouts(int max_n) {
  std::vector<Layer*> layers;
  for (const auto& l : layers_) layers.push_back(l.get());
  const std::vector<ActLayout> t = cnn::pick_layouts(be_, max_n, layers, ActLayout::kNHWC, ActLayout::kNHWC);
  CNN_CHECK(!t.empty(), "no activation layouts that every layer can use");
  for (size_t i = 0; i < layers.size(); ++i) layers[i]->set_layouts(be_, max_n, t[i], t[i + 1]);
}

// Points the layers at their slices of the flat buffers and allocates the activations.
void Net::bind_and_allocate(int max_n) {
  if (chain_) pick_layouts(max_n);
  size_t t = 0, tb = 0;
  const size_t esize = dtype_size(dt_);
  for (auto& l : layers_) {
    std::vector<float*> p, g;
    std::vector<const void*> copy;
    for (size_t i = 0; i < l->param_specs().size(); ++i, ++t) {
      p.push_back(params_ + table_[t].offset);
      g.push_back(grads_ + table_[t].offset);
      copy.push_back(static_cast<const char*>(params16()) + table_[t].offset * esize);
    }
    l->bind(p, g);
    l->bind_copy(copy);
    std::vector<float*> b;
    for (size_t i = 0; i < l->buffer_specs().size(); ++i, ++tb) b.push_back(buffers_ + buffer_table_[tb].offset);
    l->bind_buffers(b);
    l->allocate(be_, max_n);
  }
  if (scratch_) scratch_->allocate(be_);
  size_t max_act = input_.size();
  for (const Dims& od : out_dims_) max_act = std::max(max_act, od.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->is_view()) {
      acts_.push_back(nullptr);  // resolved to the input's buffer at run time
    } else {
      void* a = be_.alloc(esize * out_dims_[i].size() * max_n);
      act_bytes_ += esize * out_dims_[i].size();
      owned_.push_back(a);
      acts_.push_back(a);
    }
  }
  if (chain_) {
    for (auto& g : grad_buf_) g = be_.alloc(esize * max_act * max_n);
    act_bytes_ += 2 * esize * max_act;
  } else {
    allocate_graph_gradients();
  }
  if (dt_ != DType::kF32) {
    input16_ = be_.alloc(esize * input_.size() * max_n);
    act_bytes_ += esize * input_.size();
  }
}

const void* Net::forward(const float* x, int n, bool train) {
  CNN_CHECK(n > 0 && n <= max_n_, "forward of %d samples on a net built for %d", n, max_n_);
  if (input16_) be_.convert(input_.size() * n, DType::kF32, x, dt_, input16_);
  input_ptr_ = input16_ ? input16_ : static_cast<const void*>(x);
  ParamVersionScope scope(be_, version_);
  const auto out = [&](int j) { return j < 0 ? input_ptr_ : static_cast<const void*>(acts_[j]); };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::vector<int>& in = inputs_[i];
    const bool tr = train && !(frozen_eval_ && i < frozen_below_);
    if (layers_[i]->is_view()) {
      acts_[i] = const_cast<void*>(out(in[0]));
    } else if (auto* m = dynamic_cast<MultiInputLayer*>(layers_[i].get())) {
      std::vector<const void*> xs;
      for (int j : in) xs.push_back(out(j));
      m->forward_inputs(be_, xs, acts_[i], n, tr);
    } else {
      layers_[i]->forward(be_, out(in[0]), acts_[i], n, tr);
    }
  }
  return acts_.back();
}

void Net::backward(const void* dlogits, int n, const std::function<void(size_t)>& on_ready) {
  if (!chain_) return backward_graph(dlogits, n, on_ready);
  const void* dy = dlogits;
  int flip = 0;
  ParamVersionScope scope(be_, version_);
  for (size_t i = layers_.size(); i-- > frozen_below_;) {
    const void* x = i == 0 ? input_ptr_ : acts_[i - 1];
    if (layers_[i]->is_view()) {
      if (on_ready) on_ready(first_param_[i]);
      continue;
    }
    // The first trained layer's input gradient is never used.
    void* dx = i == frozen_below_ ? nullptr : grad_buf_[flip];
    layers_[i]->backward(be_, x, acts_[i], dy, dx, n);
    if (on_ready) on_ready(first_param_[i]);
    dy = dx;
    flip ^= 1;
  }
}

void Net::set_batch(const BatchContext& ctx) {
  for (auto& l : layers_) l->set_batch(ctx);
}

void Net::zero_grads() { be_.fill(grads_, num_params_, 0.f); }

size_t Net::activation_bytes_per_sample() const {
  size_t b = act_bytes_;
  for (const auto& l : layers_) b += l->bytes_per_sample();
  return b + (scratch_ ? scratch_->bytes_per_sample() : 0);
}

double Net::flops_per_sample() const {
  double f = 0;
  for (const auto& l : layers_) f += l->flops_per_sample();
  return f;
}

std::string Net::summary() const {
  std::string s;
  for (size_t i = 0; i < layers_.size(); ++i) {
    size_t np = 0;
    for (const auto& p : layers_[i]->param_specs()) np += p.size();
    const int first = inputs_[i][0];
    const Dims in = first < 0 ? input_ : out_dims_[first];
    // A graph's layers name what they read (the first input's shape is the one shown).
    std::string from;
    if (!chain_)
      for (int j : inputs_[i])
        from += (from.empty() ? "  <- " : ", ") + (j < 0 ? std::string("input") : layers_[j]->name());
    s += strprintf("  %-12s %-34s %4dx%-4dx%-5d -> %4dx%-4dx%-5d params %zu%s\n", layers_[i]->name().c_str(),
                   layers_[i]->describe().c_str(), in.h, in.w, in.c, out_dims_[i].h, out_dims_[i].w,
                   out_dims_[i].c, np, from.c_str());
  }
  return s;
}

void init_params(const std::vector<ParamInfo>& table, uint64_t seed, float* out) {
  for (size_t t = 0; t < table.size(); ++t) {
    const ParamInfo& p = table[t];
    float* w = out + p.offset;
    switch (p.init) {
      case Init::kZero: std::fill(w, w + p.size, 0.f); break;
      case Init::kOne: std::fill(w, w + p.size, 1.f); break;
      case Init::kHeNormal: {
        CounterRng rng(seed, 0x1a17ull << 32 | t);
        const double sd = std::sqrt(2.0 / p.fan_in);
        for (size_t i = 0; i < p.size; i += 2) {
          // Box-Muller: two normals per pair of uniforms; (0,1] keeps the log finite.
          double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
          double u2 = static_cast<double>(rng.next() >> 11) * (1.0 / 9007199254740992.0);
          double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
          w[i] = static_cast<float>(sd * r * std::cos(a));
          if (i + 1 < p.size) w[i + 1] = static_cast<float>(sd * r * std::sin(a));
        }
        break;
      }
    }
  }
}

}  // namespace cnn
