// The storage-type dispatch of a backend whose memory the host addresses (the CPU backend derives from this).
// Each of its ops hands as_fp32() its fp32 implementation and its activation tensors: fp32 tensors go to it as
// they are; bf16/fp16 inputs are widened into fp32 scratch, the fp32 implementation runs on the scratch, and
// the outputs are rounded back. Over the reference fp32 kernels this is the 16-bit oracle: by construction it
// computes the fp32 op on the widened inputs and rounds each output once, which is the contract every other
// 16-bit implementation is tested against (backend.h, "Ops on activations"). A derived backend calls its
// native 16-bit kernels instead where it has them (the CPU backend: convolution and matmul on oneDNN's bf16
// primitives).
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace cnn {

class HostMixedBackend : public Backend {
 public:
  // threads: for the conversions.
  explicit HostMixedBackend(int threads) : threads_(threads < 1 ? 1 : threads) {}

  // Remembered so that as_fp32 can suspend it: see Weights below. A derived backend that overrides it calls
  // this one too.
  void set_param_version(uint64_t version) override { param_version_ = version; }
  void convert(size_t n, DType from, const void* x, DType to, void* y) override;

 protected:
  // The activation tensors of one op, n elements each of the op's type; a null p stays null.
  struct In {  // read
    const void* p;
    size_t n;
  };
  struct Out {  // written
    void* p;
    size_t n;
  };
  struct InOut {  // read, then written
    void* p;
    size_t n;
  };
  // Read: the 16-bit copy of a parameter. Widened it lives in scratch, at the same address for every layer,
  // so the fp32 op must not reuse what it derived from earlier weights at that address under the current
  // parameter version (Backend::set_param_version: the fast CPU backend's cached filter layouts): a 16-bit
  // op with Weights runs under version 0.
  struct Weights {
    const void* p;
    size_t n;
  };

  // fp32(pointers...) with one fp32 pointer per tensor, in order (const float* for In and Weights, float*
  // for Out and InOut): the tensors themselves when t is fp32, else scratch as described at the top.
  template <class F, class... A>
  void as_fp32(DType t, F&& fp32, A... tensors) {
    static_assert(sizeof...(A) <= kSlots, "more tensors than scratch slots");
    if (t == DType::kF32) return fp32(as_f32(tensors.p)...);
    FreshWeights fresh(*this, (std::is_same<A, Weights>::value || ...));
    widened(t, fp32, std::index_sequence_for<A...>(), tensors...);
  }

  int threads_;

 private:
  static constexpr int kSlots = 4;

  // Parameter version 0 while it lives, when `active` (see Weights).
  class FreshWeights {
   public:
    FreshWeights(HostMixedBackend& be, bool active) : be_(be), version_(active ? be.param_version_ : 0) {
      if (version_ != 0) be_.set_param_version(0);
    }
    ~FreshWeights() {
      if (version_ != 0) be_.set_param_version(version_);
    }
    FreshWeights(const FreshWeights&) = delete;
    FreshWeights& operator=(const FreshWeights&) = delete;

   private:
    HostMixedBackend& be_;
    uint64_t version_;
  };

  static const float* as_f32(const void* p) { return static_cast<const float*>(p); }
  static float* as_f32(void* p) { return static_cast<float*>(p); }

  template <class F, class... A, size_t... I>
  void widened(DType t, F& fp32, std::index_sequence<I...>, A... tensors) {
    float* s[] = {stage(t, static_cast<int>(I), tensors)...};
    fp32(typed(tensors, s[I])...);
    (finish(t, tensors, s[I]), ...);
  }

  // The fp32 scratch of one tensor: inputs widened, outputs uninitialised; null for a null tensor.
  float* stage(DType t, int slot, const In& a) { return a.p ? widen(slot, t, a.p, a.n) : nullptr; }
  float* stage(DType t, int slot, const Weights& a) { return a.p ? widen(slot, t, a.p, a.n) : nullptr; }
  float* stage(DType t, int slot, const InOut& a) { return a.p ? widen(slot, t, a.p, a.n) : nullptr; }
  float* stage(DType, int slot, const Out& a) { return a.p ? scratch(slot, a.n) : nullptr; }
  static const float* typed(const In&, float* s) { return s; }
  static const float* typed(const Weights&, float* s) { return s; }
  static float* typed(const InOut&, float* s) { return s; }
  static float* typed(const Out&, float* s) { return s; }
  // Outputs rounded back to t.
  void finish(DType, const In&, float*) {}
  void finish(DType, const Weights&, float*) {}
  void finish(DType t, const InOut& a, float* s) {
    if (a.p) narrow(t, s, a.p, a.n);
  }
  void finish(DType t, const Out& a, float* s) {
    if (a.p) narrow(t, s, a.p, a.n);
  }

  // fp32 scratch `slot` holding x (n elements of type t) widened; grown on demand, so nothing is allocated
  // per call after warm-up. Ops run one at a time on a backend, so the slots are not shared.
  float* widen(int slot, DType t, const void* x, size_t n);
  float* scratch(int slot, size_t n);
  // y (n elements of t) = x rounded.
  void narrow(DType t, const float* x, void* y, size_t n);

  uint64_t param_version_ = 0;
  std::vector<float> scratch_[kSlots];
};

}  // namespace cnn
