#include "kernels/cuda/vendor/algo_select.h"

#include "src/base/error.h"

namespace cnn {

ConvImpl parse_conv_impl(const std::string& s) {
  if (s == "auto") return ConvImpl::kAuto;
  if (s == "cudnn") return ConvImpl::kCudnn;
  if (s == "custom") return ConvImpl::kCustom;
  raise(kExitUsage, "option --conv.impl: bad value '%s': choose one of: auto, cudnn, custom", s.c_str());
}

const char* conv_impl_name(ConvImpl impl) {
  switch (impl) {
    case ConvImpl::kAuto: return "auto";
    case ConvImpl::kCudnn: return "cudnn";
    case ConvImpl::kCustom: return "custom";
  }
  return "?";
}

bool use_vendor_libraries(ConvImpl impl, bool have_libraries, const std::string& device) {
  if (impl == ConvImpl::kCudnn && !have_libraries)
    raise(kExitUsage, "option --conv.impl cudnn: the %s device has no cuDNN/cuBLASLt (they run on --device cuda "
          "only); use --conv.impl auto or custom", device.c_str());
  return impl != ConvImpl::kCustom && have_libraries;
}

AlgoChoice choose_algo(const std::vector<AlgoCandidate>& candidates, const AlgoPolicy& policy) {
  AlgoChoice best;
  float best_time = 0.f;
  int failed = 0, too_big = 0, nondet = 0;
  size_t smallest_big = 0;
  const AlgoCandidate* first_big = nullptr;  // the library's first untimed preference ruled out by the cap alone
  for (const AlgoCandidate& c : candidates) {
    if (!c.ok || c.algo < 0) {
      ++failed;
      continue;
    }
    if (c.workspace > policy.workspace_cap) {
      if (too_big++ == 0 || c.workspace < smallest_big) smallest_big = c.workspace;
      if (!first_big && c.time_ms < 0.f && !best.found() && (!policy.deterministic || c.deterministic)) first_big = &c;
      continue;
    }
    if (policy.deterministic && !c.deterministic) {
      ++nondet;
      continue;
    }
    const bool timed = c.time_ms >= 0.f;
    const bool better = !best.found() || (timed && (best_time < 0.f || c.time_ms < best_time));
    if (better) {
      best.algo = c.algo;
      best.workspace = c.workspace;
      best_time = c.time_ms;
    }
  }
  if (best.found() && first_big && best_time < 0.f)
    best.passed_over = strprintf("algorithm %d, ranked before the chosen %d, needs %.1f MiB of workspace, over the "
                                 "%.0f MiB cap (raise --cudnn.workspace_mb to let it run)", first_big->algo,
                                 best.algo, first_big->workspace / 1048576.0, policy.workspace_cap / 1048576.0);
  if (!best.found()) {
    best.why_none = strprintf("no usable algorithm among %zu candidates (%d not supported", candidates.size(), failed);
    if (too_big)
      best.why_none += strprintf(", %d needing more workspace than the %.0f MiB cap (the smallest %.1f MiB; raise "
                                 "--cudnn.workspace_mb)", too_big, policy.workspace_cap / 1048576.0,
                                 smallest_big / 1048576.0);
    if (nondet) best.why_none += strprintf(", %d not deterministic (--deterministic true)", nondet);
    best.why_none += ")";
  }
  return best;
}

CudnnOutcome classify_cudnn_status(int status) {
  if (status == 0) return CudnnOutcome::kSuccess;
  const int category = status / 1000 * 1000;  // CUDNN_STATUS_CATEGORY
  return category == 2000 || category == 3000 ? CudnnOutcome::kUnsupported : CudnnOutcome::kError;
}

bool cudnn_bn_shape(int64_t rows, bool training, CudnnBnShape* shape) {
  const int64_t max_n = training ? kCudnnBnMaxTrainN : kCudnnBnMaxInferN;
  if (rows < 1) return false;
  for (int64_t h = (rows + max_n - 1) / max_n; h <= kCudnnBnMaxH && h <= rows; ++h)
    if (rows % h == 0) {
      shape->n = static_cast<int>(rows / h);
      shape->h = static_cast<int>(h);
      return true;
    }
  return false;
}

bool FallbackLog::note(const std::string& layer, const std::string& op, const std::string& reason) {
  if (!seen_.insert({layer, op}).second) return false;
  if (sink_)
    sink_(strprintf("layer %s: %s: %s; using the custom kernel", layer.empty() ? "(unnamed layer)" : layer.c_str(),
                    op.c_str(), reason.c_str()));
  return true;
}

bool FallbackLog::hint(const std::string& layer, const std::string& op, const std::string& text) {
  if (!hinted_.insert({layer, op}).second) return false;
  if (sink_) sink_(strprintf("layer %s: %s: %s", layer.empty() ? "(unnamed layer)" : layer.c_str(), op.c_str(),
                             text.c_str()));
  return true;
}

}  // namespace cnn
