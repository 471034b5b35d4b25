#include "tests/common/fd_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cnn::test {

double dot(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

::testing::AssertionResult fd_check(std::vector<float>& v, const std::vector<float>& analytic,
                                    const std::function<double()>& loss, const std::string& what,
                                    const FdConfig& cfg, const std::function<void(size_t)>& changed) {
  if (v.size() != analytic.size())
    return ::testing::AssertionFailure() << what << ": " << v.size() << " values, " << analytic.size()
                                         << " gradient entries";
  auto set = [&](size_t i, float value) {
    v[i] = value;
    if (changed) changed(i);
  };
  // The central difference with the steps really taken (v + h is rounded to float).
  auto central = [&](size_t i, float h) {
    const float keep = v[i], up = keep + h, down = keep - h;
    set(i, up);
    const double f_up = loss();
    set(i, down);
    const double f_down = loss();
    set(i, keep);
    return (f_up - f_down) / (static_cast<double>(up) - static_cast<double>(down));
  };
  std::vector<size_t> which;
  const size_t stride = cfg.max_elements && v.size() > cfg.max_elements
                            ? (v.size() + cfg.max_elements - 1) / cfg.max_elements
                            : 1;
  for (size_t i = 0; i < v.size(); i += stride) which.push_back(i);
  std::vector<double> numeric(which.size());
  double scale = 0;
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const double d1 = central(i, cfg.step), d2 = central(i, cfg.step / 2);
    numeric[k] = d2 + (d2 - d1) / 3;
    scale = std::max(scale, std::fabs(numeric[k]));
  }
  int bad = 0;
  std::string msg;
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const double a = analytic[i], n = numeric[k];
    if (!(std::fabs(a - n) <= cfg.atol * std::max(scale, cfg.scale_floor) + cfg.rtol * std::fabs(n))) {
      if (bad < 5) {
        char line[160];
        std::snprintf(line, sizeof line, "\n  [%zu] analytic %.9g numeric %.9g (relative error %.3g)", i, a, n,
                      std::fabs(a - n) / std::max(std::fabs(n), 1e-30));
        msg += line;
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << which.size()
                                       << " gradient entries differ from central differences (largest |dL/dv| "
                                       << scale << ")" << msg;
}

}  // namespace cnn::test
