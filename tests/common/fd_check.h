// Finite-difference gradient check shared by every suite that checks gradients (layers on every backend,
// the loss, whole nets). Tight enough that a gradient 0.1% off fails (tests/backend/layer_grad_test.cpp
// proves it with planted errors):
//   - central differences D(h) = (f(v+h) - f(v-h)) / (h+ + h-) with the steps h+ and h- actually taken in
//     float (v+h rounds), combined by Richardson extrapolation, R = D(h/2) + (D(h/2) - D(h)) / 3, which
//     cancels the h^2 error term, so curved losses (batch norm) are differentiated to O(h^4);
//   - the loss is summed in double by the caller;
//   - per element |analytic - R| <= atol * max(max|R|, scale_floor) + rtol * |R|: the absolute part is
//     relative to the tensor's largest derivative (or to the caller's scale_floor, for a tensor whose
//     derivatives all vanish, e.g. behind a ReLU that is off), the floor below which float rounding of the
//     forward pass dominates.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace cnn::test {

struct FdConfig {
  float step = 2e-2f;  // h
  double rtol = 2e-4;
  double atol = 1e-4;  // times the largest |numeric derivative| of the tensor (or scale_floor)
  double scale_floor = 0;
  // Checks at most this many elements, evenly spread (0: all); slow backends check a sample.
  size_t max_elements = 0;
};

// Compares analytic[i] with the numeric derivative of loss() with respect to v[i]. loss() must read v;
// `changed(i)` (optional) is called after v[i] changes, e.g. to copy it to a device.
::testing::AssertionResult fd_check(std::vector<float>& v, const std::vector<float>& analytic,
                                    const std::function<double()>& loss, const std::string& what,
                                    const FdConfig& cfg = {}, const std::function<void(size_t)>& changed = nullptr);

// L = sum(y * r) in double (dL/dy = r): the loss the layer checks differentiate.
double dot(const std::vector<float>& y, const std::vector<float>& r);

}  // namespace cnn::test
