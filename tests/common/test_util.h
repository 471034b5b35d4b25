// Helpers shared by the test suites: seeded random data and tolerance comparison that prints mismatches.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/rng.h"
#include "src/base/error.h"

namespace cnn::test {

// f() must throw cnn::Error with exit code `code` and a message that contains each of `needles`.
template <class F>
void expect_throws(F f, int code, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code);
    const std::string m = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(m.find(needle), std::string::npos) << "missing '" << needle << "' in: " << m;
  }
}
template <class F>
void expect_throws(F f, int code, const std::string& needle) {
  expect_throws(f, code, std::vector<std::string>{needle});
}

// Sets (value null: unsets) an environment variable for the guard's scope and restores what was there, or its
// absence, after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    value ? (void)setenv(name, value, 1) : (void)unsetenv(name);
  }
  ~ScopedEnv() { had_ ? (void)setenv(name_.c_str(), old_.c_str(), 1) : (void)unsetenv(name_.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// oneDNN's Winograd kernels and blocked activations take 32- and 64-channel 3x3 layers (ResNet-20's later stages)
// on AVX-512 CPUs only where cnntrain's AVX-512 Winograd kernels are off (kernels/cpu/dnnl_impl.h, avx512_wide):
// the tests of that path turn them off for their scope.
struct OnednnWinogradPath : ScopedEnv {
  OnednnWinogradPath() : ScopedEnv("CNNTRAIN_AVX512_KERNELS", "0") {}
};

// Uniform values in [lo, hi) from an explicit seed.
inline std::vector<float> random_vec(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  CounterRng rng(seed, 77);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

// |a-b| <= atol + rtol*|ref| for every element (equal infinities match: a 16-bit overflow on both sides);
// reports the first few mismatches.
template <class A, class B>
::testing::AssertionResult all_close(const A& got, const B& ref, double atol, double rtol, const std::string& what) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size();
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], r = ref[i];
    if (!(g == r || std::fabs(g - r) <= atol + rtol * std::fabs(r))) {
      if (bad < 5) {
        char line[128];
        std::snprintf(line, sizeof line, "\n  [%zu] got %.9g want %.9g (diff %.3g)", i, g, r, g - r);
        msg += line;
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " mismatches" << msg;
}

// A scratch directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cnn::test
