#include "src/model/scratch.h"

#include <algorithm>
#include <array>

#include "src/base/error.h"
#include "src/model/layers.h"

namespace cnn {

namespace {
// Every reservation starts on this boundary, what vectorised and CUDA kernels expect of a buffer's start.
constexpr size_t kAlign = 256;
}  // namespace

ScratchRegion::~ScratchRegion() {
  if (be_) be_->release(base_);
}

void ScratchRegion::begin_block() {
  top_ = 0;
  top_per_sample_ = 0;
}

void ScratchRegion::reserve(size_t bytes, size_t per_sample, std::function<void(void*)> bind) {
  CNN_CHECK(!be_, "scratch reserved after the region was allocated");
  slots_.push_back({top_, std::move(bind)});
  top_ += (bytes + kAlign - 1) / kAlign * kAlign;
  top_per_sample_ += per_sample;
  max_bytes_ = std::max(max_bytes_, top_);
  max_per_sample_ = std::max(max_per_sample_, top_per_sample_);
}

void ScratchRegion::allocate(Backend& be) {
  CNN_CHECK(!be_, "scratch region allocated twice");
  be_ = &be;
  base_ = be.alloc(std::max<size_t>(max_bytes_, 1));
  for (Slot& s : slots_) s.bind(static_cast<char*>(base_) + s.offset);
  slots_.clear();
}

Layer::~Layer() {
  for (void* p : owned_) owner_->release(p);
}

void Layer::set_layouts(Backend& be, int max_n, ActLayout in, ActLayout out) {
  CNN_CHECK(can_use_layouts(be, max_n, in, out), "layer %s: asked for activation layouts it cannot use",
            name_.c_str());
}

// best[t][s]: the most nChw16c tensors among 1..t with tensor t in layout s (the ends not counted), -1 when
// no layouts reach it; from[t][s]: tensor t-1's layout on that way.
std::vector<ActLayout> pick_layouts(Backend& be, int max_n, const std::vector<Layer*>& layers, ActLayout in,
                                    ActLayout out) {
  const size_t L = layers.size();
  const ActLayout lay[2] = {ActLayout::kNHWC, ActLayout::kNChw16c};
  const int first = in == ActLayout::kNChw16c, last = out == ActLayout::kNChw16c;
  std::vector<std::array<int, 2>> best(L + 1, {-1, -1}), from(L + 1, {0, 0});
  best[0][first] = 0;
  for (size_t i = 0; i < L; ++i)
    for (int b = 0; b < 2; ++b) {
      if (i + 1 == L && b != last) continue;
      const int gain = i + 1 < L ? b : 0;
      for (int a = 0; a < 2; ++a)
        if (best[i][a] >= 0 && best[i][a] + gain > best[i + 1][b] &&
            layers[i]->can_use_layouts(be, max_n, lay[a], lay[b])) {
          best[i + 1][b] = best[i][a] + gain;
          from[i + 1][b] = a;
        }
    }
  if (best[L][last] < 0) return {};
  std::vector<ActLayout> t(L + 1);
  for (size_t i = L, b = last;; b = from[i--][b]) {
    t[i] = lay[b];
    if (i == 0) break;
  }
  return t;
}

void Layer::place(Backend& be, size_t per_sample, int count, bool shareable, std::function<void(void*)> bind) {
  const size_t bytes = per_sample * static_cast<size_t>(count);
  if (scratch_ && shareable) {
    scratch_->reserve(bytes, per_sample, std::move(bind));
    return;
  }
  owner_ = &be;
  owned_.push_back(alloc_per_sample(be, per_sample, count));
  bind(owned_.back());
}

}  // namespace cnn
