#include "src/model/scratch.h"

#include <algorithm>

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
