// How the CUDA backend picks vendor-library algorithms (cuDNN convolutions, cuBLASLt matmuls) and when it
// falls back to the custom kernels. Plain C++ without the libraries, so that the policy is unit-tested in CI
// (tests/unit/test_algo_select.cpp); kernels/cuda/vendor/cudnn_conv.cu and kernels/cuda/vendor/cublaslt_linear.cu feed it what the
// libraries report.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cnn {

// --conv.impl: auto (cuDNN/cuBLASLt on a GPU, the custom kernels elsewhere), cudnn (the vendor libraries;
// an error where they do not exist), custom (the custom kernels everywhere).
enum class ConvImpl { kAuto, kCudnn, kCustom };
// "auto" | "cudnn" | "custom"; throws Error(kExitUsage) naming --conv.impl otherwise.
ConvImpl parse_conv_impl(const std::string& s);
const char* conv_impl_name(ConvImpl impl);
// Whether the vendor libraries serve this backend: `have_libraries` is false under the SIMT emulator.
// Asking for cudnn where there are none is a usage error (kExitUsage) naming the device.
bool use_vendor_libraries(ConvImpl impl, bool have_libraries, const std::string& device);

// One algorithm as the library describes it for one problem.
struct AlgoCandidate {
  int algo = -1;
  bool ok = false;          // the library can run it on this problem
  float time_ms = -1.f;     // measured by a timed search; negative: not timed (heuristic rank order)
  size_t workspace = 0;     // bytes
  bool deterministic = true;
};

struct AlgoPolicy {
  size_t workspace_cap = 0;   // bytes (--cudnn.workspace_mb)
  bool deterministic = false;  // --deterministic: only algorithms with reproducible results
};

struct AlgoChoice {
  int algo = -1;
  size_t workspace = 0;
  std::string why_none;  // when nothing qualifies: what ruled the candidates out
  // When one qualifies but an untimed candidate the library ranked before it was ruled out by the workspace cap
  // alone: which, how much it needs, and what to raise. Empty otherwise (a timed search measures only what fits).
  std::string passed_over;
  bool found() const { return algo >= 0; }
};

// Candidates arrive in the library's order of preference. Among those that run, fit the workspace cap and
// (when asked) are deterministic: the fastest measured one if any were timed, else the first. Timed
// candidates beat untimed ones; equal times keep the library's order.
AlgoChoice choose_algo(const std::vector<AlgoCandidate>& candidates, const AlgoPolicy& policy);

// Problem shape -> what was decided for it (an algorithm, or "use the custom kernel"). Each key is decided
// once: heuristics queries and timed searches run on a shape's first call only.
template <class Value>
class ShapeCache {
 public:
  using Key = std::vector<int64_t>;
  template <class Make>
  const Value& get(const Key& key, Make&& make) {
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
    return map_.emplace(key, make()).first->second;
  }
  size_t size() const { return map_.size(); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  std::map<Key, Value> map_;
  int64_t hits_ = 0, misses_ = 0;
};

// cuDNN statuses as the backend acts on them. cuDNN 9 reports a category in the thousands with sub-codes
// below it (CUDNN_STATUS_CATEGORY: 2000 BAD_PARAM with 2002 NULL_POINTER ... 2012, 3000 NOT_SUPPORTED with
// 3002 NOT_SUPPORTED_SHAPE ... 3014), so statuses are told apart by category, never by exact value.
// Unsupported: "not this problem", the custom kernel runs (bad parameters included: cuDNN's legacy calls report
// shapes outside a mode's limits that way). Anything else (execution failure, allocation, internal error,
// license, ...) ends the job.
enum class CudnnOutcome { kSuccess, kUnsupported, kError };
CudnnOutcome classify_cudnn_status(int status);

// The 4-d shape cuDNN's legacy batch-norm calls see for `rows` = N*H*W NHWC pixels of one batch. Spatial
// batch norm reduces over all of N, H and W alike, so any split with n*h = rows (w = 1) gives the same
// result; the split keeps n within the limits those calls enforce on N (training 880,801, inference 65,535:
// larger N fails with NOT_SUPPORTED; the limits frameworks apply before choosing cuDNN) and h within 65,535.
// The backend only passes rows, so it picks the split with the smallest h that fits. No split fits (e.g. a
// large prime rows): false, the custom kernel runs.
struct CudnnBnShape {
  int n = 0, h = 0;
};
constexpr int64_t kCudnnBnMaxTrainN = 880801, kCudnnBnMaxInferN = 65535, kCudnnBnMaxH = 65535;
bool cudnn_bn_shape(int64_t rows, bool training, CudnnBnShape* shape);

// One log line per (layer, operation) that falls back to the custom kernel, however often it runs.
class FallbackLog {
 public:
  explicit FallbackLog(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
  // Logs "layer L: OP: REASON; using the custom kernel" the first time (layer, op) is seen; returns
  // whether it logged. An empty layer name reads "(unnamed layer)".
  bool note(const std::string& layer, const std::string& op, const std::string& reason);
  // Logs "layer L: OP: TEXT" the first time (layer, op) gets a hint: the vendor path runs, but not as well as
  // it could (AlgoChoice::passed_over).
  bool hint(const std::string& layer, const std::string& op, const std::string& text);
  size_t lines() const { return seen_.size() + hinted_.size(); }

 private:
  std::function<void(const std::string&)> sink_;
  std::set<std::pair<std::string, std::string>> seen_, hinted_;
};

}  // namespace cnn
