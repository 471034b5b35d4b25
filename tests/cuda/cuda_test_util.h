// Helpers for the CUDA backend tests: device copies through a Backend, and a fixture that runs each test
// under one SIMT emulator schedule (0 = thread-index order, others = seeded reorderings).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "kernels/simt/simt.h"
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

class EmuSchedule : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override {
    simt::set_schedule_seed(GetParam());
    bytes_before_ = simt::device_bytes_in_use();
    emu_ = make_emu_backend();
    cpu_ = make_cpu_backend(1);
  }
  void TearDown() override {
    emu_.reset();
    EXPECT_EQ(simt::device_bytes_in_use(), bytes_before_) << "the emulated backend leaked device memory";
    simt::set_schedule_seed(0);
  }
  std::unique_ptr<Backend> emu_, cpu_;
  size_t bytes_before_ = 0;
};

inline std::string schedule_name(const ::testing::TestParamInfo<uint64_t>& info) {
  return info.param == 0 ? "default" : "seed" + std::to_string(info.param);
}

}  // namespace cnn::test
