// Helpers for the CUDA backend tests: device copies through a Backend, and a fixture that runs each test on
// the emulated backend under one SIMT emulator schedule, or on a real GPU.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn::test {

// The schedules every emulated test runs under: the default order and three seeded reorderings.
inline const uint64_t kSchedules[] = {0, 101, 202, 303};

// Device buffers of one backend, released (in reverse) when the holder goes away.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(Backend& be) : be_(be) {}
  ~DeviceBuffers() {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) be_.release(*it);
  }
  template <class T>
  T* upload(const std::vector<T>& host) {
    T* d = static_cast<T*>(hold(be_.alloc(sizeof(T) * host.size())));
    be_.upload(d, host.data(), sizeof(T) * host.size());
    return d;
  }
  float* zeros(size_t n) { return upload(std::vector<float>(n, 0.f)); }
  template <class T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> host(n);
    be_.download(host.data(), d, sizeof(T) * n);
    return host;
  }

 private:
  void* hold(void* p) {
    held_.push_back(p);
    return p;
  }
  Backend& be_;
  std::vector<void*> held_;
};

// Where a test runs: the emulated backend under one SIMT schedule (0 = thread-index order, others = seeded
// reorderings), or the nvcc-built backend on a real GPU (skipped where there is none).
struct Target {
  bool gpu;
  uint64_t seed;
};

// The emulated schedules plus the GPU: `make gpu-test` runs the `gpu` instances on a machine with one.
inline std::vector<Target> all_targets() {
  std::vector<Target> v;
  for (uint64_t s : kSchedules) v.push_back({false, s});
  v.push_back({true, 0});
  return v;
}

class DeviceTest : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_backend(1);
    if (GetParam().gpu) {
#ifdef CNN_WITH_CUDA
      try {
        dev_ = make_cuda_backend(0);
      } catch (const Error& e) {
        GTEST_SKIP() << "no GPU: " << e.what();
      }
#else
      GTEST_SKIP() << "built without CUDA (USE_CUDA=0 or no nvcc)";
#endif
      return;
    }
    simt::set_schedule_seed(GetParam().seed);
    bytes_before_ = simt::device_bytes_in_use();
    dev_ = make_emu_backend();
  }
  void TearDown() override {
    dev_.reset();
    if (GetParam().gpu) return;
    EXPECT_EQ(simt::device_bytes_in_use(), bytes_before_) << "the emulated backend leaked device memory";
    simt::set_schedule_seed(0);
  }
  std::unique_ptr<Backend> dev_, cpu_;
  size_t bytes_before_ = 0;
};

inline std::string target_name(const ::testing::TestParamInfo<Target>& info) {
  if (info.param.gpu) return "gpu";
  return info.param.seed == 0 ? "emu_default" : "emu_seed" + std::to_string(info.param.seed);
}

}  // namespace cnn::test
