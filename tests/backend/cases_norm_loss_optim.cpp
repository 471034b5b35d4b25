// Sweep cases: batch normalisation, softmax cross-entropy and the optimizer updates.
#include <cmath>

#include "kernels/backend.h"
#include "kernels/batchnorm.h"
#include "kernels/rng.h"
#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

// The batch-norm cases of one shape and epilogue.
void add_batchnorm_cases(int rows, int c, const BnEpilogue& ep) {
  const float eps = 1e-5f, momentum = 0.1f;
  const std::string shape = "rows " + std::to_string(rows) + " c " + std::to_string(c) + ep.name();
  const size_t nx = static_cast<size_t>(rows) * c;
  const uint64_t s = 1000 + rows * 100 + c;
  add_case({"batchnorm_forward_train", shape, {}, [=](Run& r) {
    float* d_y = r.garbage(nx);
    float *d_mean = r.garbage(c), *d_invstd = r.garbage(c);
    float* d_rm = r.upload(random_vec(c, s + 1));
    float* d_rv = r.upload(random_vec(c, s + 2, 0.5f, 2.f));
    uint32_t* d_mask = r.upload(std::vector<uint32_t>(relu_mask_words(nx), 0x5a5a5a5au));
    const float* d_z = ep.residual ? r.upload(random_vec(nx, s + 8)) : nullptr;
    const auto x = bn_input(rows, c, s), gamma = random_vec(c, s + 3), beta = random_vec(c, s + 4);
    r.be.batchnorm_forward_train(DType::kF32, rows, c, r.upload(x), d_z, r.upload(gamma), r.upload(beta), eps,
                                 momentum, ep.act(), d_y, d_mask, d_mean, d_invstd, d_rm, d_rv);
    // One row: the variance is 0 and invstd = 1/sqrt(eps) ~ 316, which scales every rounding error.
    const Tol t = rows == 1 ? Tol{1e-3, 1e-4} : kDefault;
    // y = x*scale + shift in float with x up to ~230 (the channel offsets) and std ~0.3: scale*x and
    // shift are ~750, whose ulp (6e-5) bounds y's rounding whatever computes the statistics (the fast
    // CPU kernel's one-pass shifted sums land a last bit apart from the reference's two passes); more where a
    // channel's few rows nearly agree (cuDNN on an H100 missed 1e-4 by 2e-3 there, rows 2: bn_y_atol).
    r.output("y", d_y, nx, Tol{rows == 1 ? 1e-3 : bn_y_atol(rows, c, x, gamma, beta, eps, 1e-4), 1e-4});
    r.output("save_mean", d_mean, c, kDefault);
    r.output("save_invstd", d_invstd, c, t);
    r.output("running_mean", d_rm, c, kDefault);
    r.output("running_var", d_rv, c, kDefault);
    if (ep.relu) r.output_host("relu_mask", mask_bits(r, d_mask, nx), kExact);
  }});
  add_case({"batchnorm_forward_infer", shape, {}, [=](Run& r) {
    float* d_y = r.garbage(nx);
    const float* d_z = ep.residual ? r.upload(random_vec(nx, s + 8)) : nullptr;
    r.be.batchnorm_forward_infer(DType::kF32, rows, c, r.upload(bn_input(rows, c, s)), d_z, r.upload(random_vec(c, s + 3)),
                                 r.upload(random_vec(c, s + 4)), r.upload(random_vec(c, s + 1)),
                                 r.upload(random_vec(c, s + 2, 0.5f, 2.f)), eps, ep.act(), d_y);
    r.output("y", d_y, nx, kDefault);
  }});
  for (bool with_dx : {true, false})
    add_case({"batchnorm_backward", shape + (with_dx ? "" : " no dx"), {}, [=](Run& r) {
      // The saved statistics and ReLU mask of the reference forward pass, so the backward pass is tested
      // on its own.
      const auto x = bn_input(rows, c, s);
      const auto gamma = random_vec(c, s + 3), z = random_vec(nx, s + 8);
      std::vector<float> y(nx), mean(c), invstd(c), rm(c, 0.f), rv(c, 1.f);
      std::vector<uint32_t> mask(relu_mask_words(nx));
      batchnorm_forward_train_cpu(rows, c, x.data(), ep.residual ? z.data() : nullptr, gamma.data(),
                                  random_vec(c, s + 4).data(), eps, momentum, ep.act(), y.data(), mask.data(),
                                  mean.data(), invstd.data(), rm.data(), rv.data());
      float* d_dx = with_dx ? r.garbage(nx) : nullptr;
      float* d_dz = ep.residual ? r.garbage(nx) : nullptr;
      float* d_dgamma = r.upload(random_vec(c, s + 5));  // accumulated onto
      float* d_dbeta = r.upload(random_vec(c, s + 6));
      const float *d_x = r.upload(x), *d_gamma = r.upload(gamma);
      // As in training, a forward pass of this shape first: cuDNN's backward takes that pass's epsilon
      // (kernels/cudnn_batchnorm.h), so on a GPU the vendor path is the one compared, not the fallback.
      r.be.batchnorm_forward_train(DType::kF32, rows, c, d_x, nullptr, d_gamma, d_gamma, eps, momentum, false, r.garbage(nx),
                                   r.upload(std::vector<uint32_t>(relu_mask_words(nx))), r.garbage(c), r.garbage(c),
                                   r.upload(rm), r.upload(rv));
      r.be.batchnorm_backward(DType::kF32, rows, c, d_x, ep.relu ? r.upload(mask) : nullptr, r.upload(random_vec(nx, s + 7)),
                              d_gamma, r.upload(mean), r.upload(invstd), d_dx, d_dz, d_dgamma, d_dbeta);
      // Sums over up to 1100 rows of values of order 1: the absolute error grows with the reduction.
      if (with_dx) r.output("dx", d_dx, nx, Tol{1e-4, 1e-3});
      if (ep.residual) r.output("dresidual", d_dz, nx, kExact);  // dy masked: values move, no arithmetic
      r.output("dgamma", d_dgamma, c, Tol{1e-4, 1e-4});
      r.output("dbeta", d_dbeta, c, Tol{1e-4, 1e-4});
    }});
}

void add_softmax_xent_cases() {
  // 300 rows: more than the CUDA grid's warps, so warps loop over rows.
  for (int n : {1, 37, 300})
    for (int classes : {3, 10, 45})
      for (float smooth : {0.f, 0.1f})
        for (bool grad : {true, false}) {
          const std::string shape = "n " + std::to_string(n) + " classes " + std::to_string(classes) +
                                    " smoothing " + std::to_string(smooth) + (grad ? "" : " (no dlogits)");
          const uint64_t s = 500 + n * 64 + classes;
          auto z = random_vec(static_cast<size_t>(n) * classes, s, -3.f, 3.f);
          std::vector<int32_t> labels(n);
          CounterRng rng(s + 1, 1);
          for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
          labels[0] = 0;  // and a row that is certainly classified correctly
          z[0] = 10.f;
          add_case({"softmax_xent", shape, {}, [=](Run& r) {
            float* d_dz = grad ? r.garbage(z.size()) : nullptr;
            double loss = 0.5;
            int64_t correct = 2;  // both accumulate onto what is there
            r.be.softmax_xent(DType::kF32, n, classes, r.upload(z), r.upload(labels), smooth, 1.f / n, d_dz, &loss, &correct);
            r.output_host("loss_sum", {loss}, Tol{0, 1e-5});
            r.output_host("correct", {static_cast<double>(correct)}, kExact);
            if (grad) r.output("dlogits", d_dz, z.size(), Tol{1e-6, 1e-4});
          }, [=](Run& r) {
            const oracle::Xent o =
                oracle::softmax_xent(n, classes, {z.begin(), z.end()}, labels, smooth, 1.f / n);
            r.output_host("loss_sum", {0.5 + o.loss_sum}, Tol{0, 1e-5});
            r.output_host("correct", {2.0 + o.correct}, kExact);
            if (grad) r.output_host("dlogits", o.dlogits, Tol{1e-6, 1e-4});
          }});
        }
}

void add_optimizer_cases() {
  for (size_t n : {size_t{1}, size_t{5003}, size_t{70001}}) {
    for (bool nesterov : {false, true})
      add_case({"sgd_update", "n=" + std::to_string(n) + (nesterov ? " nesterov" : ""), {}, [=](Run& r) {
        float* d_w = r.upload(random_vec(n, 600 + nesterov));
        float* d_v = r.upload(random_vec(n, 620));
        const float* d_g = r.upload(random_vec(n, 610));
        for (int step = 0; step < 2; ++step) r.be.sgd_update(n, d_w, d_g, d_v, 0.1f, 0.9f, 5e-4f, nesterov);
        r.output("w", d_w, n, Tol{1e-6, 1e-5});
        r.output("v", d_v, n, Tol{1e-6, 1e-5});
      }});
    add_case({"adamw_update", "n=" + std::to_string(n), {}, [=](Run& r) {
      float* d_w = r.upload(random_vec(n, 80));
      float* d_m = r.upload(random_vec(n, 82));
      float* d_v = r.upload(random_vec(n, 83, 0.f, 1.f));
      const float* d_g = r.upload(random_vec(n, 81));
      const float b1 = 0.9f, b2 = 0.999f;
      for (int t = 1; t <= 2; ++t)
        r.be.adamw_update(n, d_w, d_g, d_m, d_v, 1e-3f, b1, b2, 1e-8f, 0.01f, 1 - std::pow(b1, t),
                          1 - std::pow(b2, t));
      r.output("w", d_w, n, Tol{1e-6, 1e-5});
      r.output("m", d_m, n, Tol{1e-7, 1e-5});
      r.output("v", d_v, n, Tol{1e-7, 1e-5});
    }});
  }
}

}  // namespace

CNN_SWEEP_CASES(norm_loss_optim) {
  for (int rows : {1, 2, 37, 1100})
    for (int c : {3, 45})
      for (const BnEpilogue ep : kBnEpilogues) add_batchnorm_cases(rows, c, ep);
  add_softmax_xent_cases();
  add_optimizer_cases();
}

}  // namespace cnn::sweep
