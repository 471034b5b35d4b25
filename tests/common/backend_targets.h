// The backends a test can run on, for suites that compare them with the reference kernels (the oracle) or
// check each one alone (the reference kernels included, as TargetKind::kReference): the fast CPU backend
// (oneDNN + OpenMP) at 1 and 3 threads, the CUDA backend on the SIMT emulator under the default schedule and
// three seeded reorderings (each with four blocks resident at once, their threads interleaved, and scrambled
// wmma fragment mappings), and the CUDA backend on a real GPU (skipped where there is none, or in a build
// without CUDA), with the custom kernels only ("cuda") and with cuDNN/cuBLASLt first ("cuda_vendor"), both
// with TF32 off so the reference's tolerances hold. With CNNTRAIN_REQUIRE_GPU=1 (the GPU bundle's
// run-gpu-checks.sh sets it) a GPU target that cannot run fails with the reason instead of skipping.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace cnn::test {

enum class TargetKind { kReference, kCpu, kEmu, kGpu, kGpuVendor };

struct BackendTarget {
  std::string name;  // usable in a test name: "cpu_t3", "emu_seed101", "cuda"
  TargetKind kind;
  int threads = 1;         // kCpu
  uint64_t simt_seed = 0;  // kEmu: SIMT schedule (0 = thread-index order, blocks one after another)
};

// Every backend compared with the oracle. `emu_schedules` limits the emulated targets to the first N
// schedules (a slow suite may take fewer).
std::vector<BackendTarget> backend_targets(size_t emu_schedules = 4);

// CNNTRAIN_REQUIRE_GPU=1: a missing or unusable GPU is a failure, not a skip.
bool gpu_required();
// The GPU backend (custom kernels, or cuDNN/cuBLASLt first), TF32 off, with --deterministic's reductions when
// `deterministic`; null with the reason where there is none (no GPU, or a build without CUDA).
std::unique_ptr<Backend> make_gpu_test_backend(bool vendor, std::string* reason, bool deterministic = false);

// The oracle: the single-threaded reference kernels of kernels/*_cpu.cpp.
std::unique_ptr<Backend> make_reference_backend();

// Creates a target's backend for the duration of a test: sets the emulator's schedule, resident blocks and
// wmma scrambling (back to the defaults afterwards), gives an emulated target `emu_opts`, and on destruction fails the test if the emulated device
// leaked memory. skip_reason() is non-empty when the target cannot run here (no GPU); the caller then
// GTEST_SKIP()s with it (under CNNTRAIN_REQUIRE_GPU=1 the test has already failed by then).
class TargetBackend {
 public:
  explicit TargetBackend(const BackendTarget& t, const GpuOptions& emu_opts = {});
  ~TargetBackend();
  TargetBackend(const TargetBackend&) = delete;
  TargetBackend& operator=(const TargetBackend&) = delete;
  Backend* get() { return be_.get(); }
  const std::string& skip_reason() const { return skip_; }

 private:
  BackendTarget t_;
  std::unique_ptr<Backend> be_;
  std::string skip_;
  size_t emu_bytes_before_ = 0;
};

inline std::string target_param_name(const ::testing::TestParamInfo<BackendTarget>& info) {
  return info.param.name;
}

}  // namespace cnn::test
