// Sweep cases: element-wise ops (activations, axpy/scale/sum of squares), the option-A
// shortcut and dropout. Sizes wrap grid-stride loops and leave vector tails.
#include "kernels/rng.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {
const size_t kSizes[] = {1, 255, 70001, 100003};

std::string n_str(size_t n) { return "n=" + std::to_string(n); }
}  // namespace

CNN_SWEEP_CASES(pointwise) {
  for (size_t n : kSizes) {
    add_case({"relu_forward", n_str(n), {}, [n](Run& r) {
      float* d_y = r.garbage(n);
      r.be.relu_forward(DType::kF32, n, r.upload(random_vec(n, n)), d_y);
      r.output("y", d_y, n, kExact);
    }});
    add_case({"relu_forward", n_str(n) + " in place", {}, [n](Run& r) {
      float* d_x = r.upload(random_vec(n, n + 1));
      r.be.relu_forward(DType::kF32, n, d_x, d_x);
      r.output("y", d_x, n, kExact);
    }});
    add_case({"relu_backward", n_str(n), {}, [n](Run& r) {
      float* d_dx = r.garbage(n);
      r.be.relu_backward(DType::kF32, n, r.upload(random_vec(n, n + 2)), r.upload(random_vec(n, n + 3)), d_dx);
      r.output("dx", d_dx, n, kExact);
    }});
    add_case({"axpy", n_str(n), {}, [n](Run& r) {
      float* d_y = r.upload(random_vec(n, n + 6));
      r.be.axpy(DType::kF32, n, 0.3f, r.upload(random_vec(n, n + 7)), d_y);
      r.output("y", d_y, n, kDefault);  // a fused multiply-add may round once instead of twice
    }});
    add_case({"scale", n_str(n), {}, [n](Run& r) {
      float* d_x = r.upload(random_vec(n, n + 8));
      r.be.scale(n, -0.7f, d_x);
      r.output("x", d_x, n, kExact);
    }});
    add_case({"sum_squares", n_str(n), {}, [n](Run& r) {
      // Accumulated in double by every backend: only the summation order differs.
      r.output_host("sum", {r.be.sum_squares(n, r.upload(random_vec(n, n + 9)))}, Tol{0, 1e-9});
    }});
  }
  for (int stride : {1, 2})
    for (int h : {7, 8}) {
      const int n = 2, w = h + 1, c = 3, k = 8, P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
      const size_t xs = static_cast<size_t>(n) * h * w * c, ys = static_cast<size_t>(n) * P * Q * k;
      const std::string shape = "n2 " + std::to_string(h) + "x" + std::to_string(w) + " c3 -> k8 stride " +
                                std::to_string(stride);
      add_case({"shortcut_pad_forward", shape, {}, [=](Run& r) {
        float* d_y = r.garbage(ys);
        r.be.shortcut_pad_forward(DType::kF32, n, h, w, c, stride, k, r.upload(random_vec(xs, 50 + h)), d_y);
        r.output("y", d_y, ys, kExact);
      }});
      add_case({"shortcut_pad_backward_add", shape, {}, [=](Run& r) {
        float* d_dx = r.upload(random_vec(xs, 61 + h));  // added to at the sampled pixels, kept elsewhere
        r.be.shortcut_pad_backward_add(DType::kF32, n, h, w, c, stride, k, r.upload(random_vec(ys, 60 + h)), d_dx);
        r.output("dx", d_dx, xs, kExact);
      }});
    }
  struct Drop {
    int n;
    size_t per;
    float p;
  };
  // n x 1: one draw per sample (stochastic depth's scales, src/model/join_layers.cpp).
  for (Drop t : {Drop{5, 1001, 0.3f}, Drop{4, 999, 0.25f}, Drop{1, 70001, 0.5f}, Drop{3, 7, 0.f},
                 Drop{4099, 1, 0.1875f}}) {
    const size_t count = t.n * t.per;
    const std::string shape = "n" + std::to_string(t.n) + " x " + std::to_string(t.per) + " p " +
                              std::to_string(t.p);
    add_case({"dropout_forward", shape, {}, [=](Run& r) {
      std::vector<int64_t> ids = {7, 123456789, 0, 42, 99};  // global sample ids: the masks' keys
      for (int i = 5; i < t.n; ++i) ids.push_back(1000 + 3 * i);
      ids.resize(t.n);
      float* d_y = r.garbage(count);
      uint8_t* d_mask = r.upload(std::vector<uint8_t>(count, 7));
      r.be.dropout_forward(DType::kF32, t.n, t.per, r.upload(random_vec(count, 11)), t.p, 0x5eed, r.upload(ids), d_y,
                           d_mask);
      r.output("mask", d_mask, count);
      r.output("y", d_y, count, kExact);
    }});
    add_case({"dropout_backward", shape, {}, [=](Run& r) {
      std::vector<uint8_t> mask(count);
      CounterRng rng(12, 3);
      for (auto& m : mask) m = rng.uniform() >= t.p;
      float* d_dx = r.garbage(count);
      r.be.dropout_backward(DType::kF32, count, t.p, r.upload(random_vec(count, 13)), r.upload(mask), d_dx);
      r.output("dx", d_dx, count, kExact);
    }});
  }
}

}  // namespace cnn::sweep
