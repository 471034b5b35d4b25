// Batch norm over per-operand layouts (Backend::batchnorm_*_layout). A case states its tensors in NHWC: a
// backend that offers nChw16c (blocked_batchnorm_ok) gets them in the case's layouts and its results are
// converted back, any other backend (and the oracle, the reference kernels) gets the same case all NHWC, so
// every backend is compared on the same values. The ReLU mask's bit order follows the layouts (backend.h), so
// the forward cases compare it in NHWC order and the backward cases hand each backend the reference mask in its
// own order.
#include "kernels/backend.h"
#include "kernels/batchnorm.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {
namespace {

constexpr ActLayout kN = ActLayout::kNHWC, kB = ActLayout::kNChw16c;

// Where element e (NHWC order) of an [n, hw, c] tensor sits in layout l.
size_t index_in(const BnShape& s, ActLayout l, size_t e) {
  if (l == kN) return e;
  const size_t c = s.c, p = e / c % s.hw, i = e / c / s.hw, ch = e % c;
  return ((i * (c / 16) + ch / 16) * s.hw + p) * 16 + ch % 16;
}
std::vector<float> to_layout(const BnShape& s, ActLayout l, const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t e = 0; e < v.size(); ++e) r[index_in(s, l, e)] = v[e];
  return r;
}
// A mask in NHWC bit order moved to the order of shape s (the nChw16c index when any operand is nChw16c).
std::vector<uint32_t> mask_to(const BnShape& s, const std::vector<uint32_t>& m) {
  const bool blocked = s.x == kB || s.y == kB || s.residual == kB;
  const size_t n = s.rows() * s.c;
  std::vector<uint32_t> r(m.size(), 0u);
  for (size_t e = 0; e < n; ++e)
    if (m[e / 32] >> (e % 32) & 1u) {
      const size_t k = blocked ? index_in(s, kB, e) : e;
      r[k / 32] |= 1u << (k % 32);
    }
  return r;
}

// The case's shape as backend `be` takes it: its layouts where it offers nChw16c, all NHWC otherwise.
BnShape as_taken(Backend& be, BnShape s) {
  if (!be.blocked_batchnorm_ok(DType::kF32)) s.x = s.y = s.residual = kN;
  return s;
}
const float* put(Run& r, const BnShape& s, ActLayout l, const std::vector<float>& nhwc) {
  return r.upload(to_layout(s, l, nhwc));
}
// Output `name`, a tensor of layout l, recorded in NHWC order.
void take(Run& r, const std::string& name, const BnShape& s, ActLayout l, const float* d, Tol t) {
  const size_t n = s.rows() * s.c;
  const std::vector<float> v = r.download(d, n);
  std::vector<double> nhwc(n);
  for (size_t e = 0; e < n; ++e) nhwc[e] = v[index_in(s, l, e)];
  r.output_host(name, std::move(nhwc), t);
}

void add_layout_cases(const BnShape& shape, const BnEpilogue& ep, const char* layouts) {
  const float eps = 1e-5f, momentum = 0.1f;
  const int rows = static_cast<int>(shape.rows()), c = shape.c;
  const size_t nx = shape.rows() * c;
  const uint64_t seed = 3000 + rows + c;
  const std::string what = "n " + std::to_string(shape.n) + " hw " + std::to_string(shape.hw) + " c " +
                           std::to_string(c) + " " + layouts + ep.name();
  const auto x = bn_input(rows, c, seed), z = random_vec(nx, seed + 8), gamma = random_vec(c, seed + 3),
             beta = random_vec(c, seed + 4);
  add_case({"batchnorm_forward_train_layout", what, {}, [=](Run& r) {
    const BnShape s = as_taken(r.be, shape);
    float *d_y = r.garbage(nx), *d_mean = r.garbage(c), *d_invstd = r.garbage(c);
    float* d_rm = r.upload(random_vec(c, seed + 1));
    float* d_rv = r.upload(random_vec(c, seed + 2, 0.5f, 2.f));
    uint32_t* d_mask = r.upload(std::vector<uint32_t>(relu_mask_words(nx), 0x5a5a5a5au));
    r.be.batchnorm_forward_train_layout(DType::kF32, s, put(r, s, s.x, x), ep.residual ? put(r, s, s.residual, z)
                                        : nullptr, r.upload(gamma), r.upload(beta), eps, momentum, ep.act(), d_y,
                                        d_mask, d_mean, d_invstd, d_rm, d_rv);
    // The NHWC cases' tolerance (cases_norm_loss_optim.cpp).
    take(r, "y", s, s.y, d_y, Tol{bn_y_atol(rows, c, x, gamma, beta, eps, 1e-4), 1e-4});
    r.output("save_mean", d_mean, c, kDefault);
    r.output("save_invstd", d_invstd, c, kDefault);
    r.output("running_mean", d_rm, c, kDefault);
    r.output("running_var", d_rv, c, kDefault);
  }});
  add_case({"batchnorm_forward_infer_layout", what, {}, [=](Run& r) {
    const BnShape s = as_taken(r.be, shape);
    float* d_y = r.garbage(nx);
    r.be.batchnorm_forward_infer_layout(DType::kF32, s, put(r, s, s.x, x), ep.residual ? put(r, s, s.residual, z)
                                        : nullptr, r.upload(gamma), r.upload(beta), r.upload(random_vec(c, seed + 1)),
                                        r.upload(random_vec(c, seed + 2, 0.5f, 2.f)), eps, ep.act(), d_y);
    take(r, "y", s, s.y, d_y, kDefault);
  }});
  add_case({"batchnorm_backward_layout", what, {}, [=](Run& r) {
    const BnShape s = as_taken(r.be, shape);
    // The reference forward's statistics and mask, so that the backward pass is tested on its own.
    std::vector<float> y(nx), mean(c), invstd(c), rm(c, 0.f), rv(c, 1.f);
    std::vector<uint32_t> mask(relu_mask_words(nx));
    batchnorm_forward_train_cpu(rows, c, x.data(), ep.residual ? z.data() : nullptr, gamma.data(), beta.data(), eps,
                                momentum, ep.act(), y.data(), mask.data(), mean.data(), invstd.data(), rm.data(),
                                rv.data());
    float* d_dx = r.garbage(nx);
    float* d_dz = ep.residual ? r.garbage(nx) : nullptr;
    float* d_dgamma = r.upload(random_vec(c, seed + 5));  // accumulated onto
    float* d_dbeta = r.upload(random_vec(c, seed + 6));
    r.be.batchnorm_backward_layout(DType::kF32, s, put(r, s, s.x, x), ep.relu ? r.upload(mask_to(s, mask)) : nullptr,
                                   put(r, s, s.y, random_vec(nx, seed + 7)), r.upload(gamma), r.upload(mean),
                                   r.upload(invstd), d_dx, d_dz, d_dgamma, d_dbeta);
    take(r, "dx", s, s.x, d_dx, Tol{1e-4, 1e-3});
    if (ep.residual) take(r, "dresidual", s, s.residual, d_dz, kExact);
    r.output("dgamma", d_dgamma, c, Tol{1e-4, 1e-4});
    r.output("dbeta", d_dbeta, c, Tol{1e-4, 1e-4});
  }});
}

}  // namespace

CNN_SWEEP_CASES(layout) {
  struct L {
    ActLayout x, y, r;
    const char* name;
  };
  const L layouts[] = {{kB, kB, kB, "x,y,res 16c"}, {kN, kB, kN, "y 16c"}, {kB, kN, kB, "x,res 16c"}};
  const BnShape shapes[] = {{3, 7 * 7, 32}, {2, 1, 48}};
  for (BnShape s : shapes)
    for (const L& l : layouts)
      for (const BnEpilogue& ep : {BnEpilogue{false, false}, BnEpilogue{true, true}}) {
        s.x = l.x, s.y = l.y, s.residual = l.r;
        add_layout_cases(s, ep, l.name);
      }
}

}  // namespace cnn::sweep
