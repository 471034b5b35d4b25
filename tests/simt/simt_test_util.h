// Helpers for the SIMT emulator tests: device buffers, seeded random inputs, tolerant comparisons.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/simt/cuda_compat.h"

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(&p_, n * sizeof(T)), cudaSuccess); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { EXPECT_EQ(cudaFree(p_), cudaSuccess); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), n_);
    ASSERT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void fill_bytes(int value) { ASSERT_EQ(cudaMemset(p_, value, n_ * sizeof(T)), cudaSuccess); }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<int> random_ints(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(n);
  for (int& x : v) x = dist(rng);
  return v;
}

// |got - want| <= atol + rtol*|want| everywhere; prints the first mismatches.
template <typename T, typename U>
::testing::AssertionResult all_close(const std::vector<T>& got, const std::vector<U>& want, double atol,
                                     double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  int bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::fabs(g - w) <= atol + rtol * std::fabs(w)) continue;
    if (bad == 0) result = ::testing::AssertionFailure();
    if (++bad <= 5) result << "\n  [" << i << "] got " << g << ", want " << w;
  }
  if (bad > 5) result << "\n  ... " << bad << " mismatches in all";
  return result;
}
