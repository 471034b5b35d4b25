// Sweep cases: mixup/cutmix (Backend::mix_images) and its soft-target loss (Backend::softmax_xent_mix_totals)
// in fp32, bf16 and fp16. The fast CPU backend runs both reference kernels itself, so the expected outputs come
// from the independent oracles of tests/backend/oracles.h: the mixed images from the definition, and the loss
// as a cross-entropy against the explicit soft target lam * q(label) + (1 - lam) * q(partner's label).
#include <algorithm>
#include <cmath>

#include "kernels/mix_images.h"
#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"
#include "tests/common/half_test_util.h"

namespace cnn::sweep {

namespace {

// Draws of every kind, cycling: none, mixup, a cutmix box inside the image, the whole image, one to the
// bottom-right edge, mixup again with a small lam.
std::vector<MixDraw> case_draws(int n, int h, int w) {
  std::vector<MixDraw> d(n);
  for (int i = 0; i < n; ++i) {
    MixDraw& m = d[i];
    switch (i % 6) {
      case 0: break;
      case 1: m.lam = 0.25f + 0.5f * static_cast<float>(i) / n; break;
      case 2: m.box_y = h / 3, m.box_x = w / 4, m.box_h = std::max(1, h / 2), m.box_w = std::max(1, w / 3); break;
      case 3: m.box_h = h, m.box_w = w; break;
      case 4: m.box_y = i % h, m.box_x = (3 * i) % w, m.box_h = h - i % h, m.box_w = w - (3 * i) % w; break;
      default: m.lam = 0.03f; break;
    }
    if (m.box_h > 0) m.lam = 1.f - static_cast<float>(m.box_h * m.box_w) / static_cast<float>(h * w);
  }
  return d;
}

void add_mix_images_cases() {
  struct Shape {
    int n, h, w, c;
  };
  for (Shape s : {Shape{2, 1, 1, 1}, Shape{6, 5, 7, 3}, Shape{12, 13, 11, 4}, Shape{4, 32, 32, 3}}) {
    const size_t count = static_cast<size_t>(s.n) * s.h * s.w * s.c;
    const uint64_t seed = 900 + count;
    const std::string shape = "n" + std::to_string(s.n) + " " + std::to_string(s.h) + "x" + std::to_string(s.w) +
                              " c" + std::to_string(s.c);
    add_case({"mix_images", shape, {}, [=](Run& r) {
      float* d_x = r.upload(random_vec(count, seed));
      r.be.mix_images(s.n, s.h, s.w, s.c, r.upload(case_draws(s.n, s.h, s.w)), d_x);
      r.output("x", d_x, count, kDefault);
    }, [=](Run& r) {
      r.output_host("x", oracle::mix_images(s.n, s.h, s.w, s.c, random_vec(count, seed), case_draws(s.n, s.h, s.w)),
                    kDefault);
    }});
  }
}

// Row i's mixing as the loss sees it: lam and the partner's label (some equal to the row's own label).
std::vector<MixDraw> loss_draws(int n, int classes, const std::vector<int32_t>& labels) {
  std::vector<MixDraw> d(n);
  for (int i = 0; i < n; ++i) {
    d[i].lam = i % 4 == 0 ? 1.f : 0.05f + 0.9f * static_cast<float>((i * 7) % n) / n;
    d[i].partner_label = i % 4 == 1 ? labels[i] : (i * 3 + 1) % classes;
  }
  return d;
}

std::vector<int32_t> loss_labels(int n, int classes) {
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (i * 5 + n) % classes;
  return labels;
}

// The explicit target [n, classes]: lam * q(label) + (1 - lam) * q(partner), q smoothed by eps.
std::vector<double> soft_targets(int n, int classes, const std::vector<int32_t>& labels,
                                 const std::vector<MixDraw>& d, double eps) {
  std::vector<double> q(static_cast<size_t>(n) * classes);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < classes; ++j) {
      const double own = eps / classes + (j == labels[i] ? 1.0 - eps : 0.0);
      const double other = eps / classes + (j == d[i].partner_label ? 1.0 - eps : 0.0);
      q[static_cast<size_t>(i) * classes + j] = d[i].lam * own + (1.0 - d[i].lam) * other;
    }
  return q;
}

// Rows 2, 33 and 70 (7, 45 and 7 classes: a row wider than a warp) accumulated onto one LossTotals.
struct LossShape {
  int n, classes;
};
constexpr LossShape kLossShapes[] = {{2, 7}, {33, 45}, {70, 7}};

void add_xent_mix_case(DType t) {
  const bool half = t != DType::kF32;
  const Tol dtol = half ? Tol{1e-3, 2 * unit_roundoff(t)} : kDefault, ltol{1e-6, half ? 1e-5 : 1e-6};
  auto logits = [=](int n, int classes) {
    return random_vec(static_cast<size_t>(n) * classes, 70 + n, -3.f, 3.f);
  };
  auto scale = [=](int n) { return half ? 65536.f / n : 0.5f; };  // fp16 loss scaling: the gradient carries it
  add_case({"softmax_xent_mix_totals", std::string(dtype_name(t)) + " n 2, 33, 70, accumulated", {}, [=](Run& r) {
    LossTotals* d_totals = r.upload(std::vector<LossTotals>(1, LossTotals{0.5, 3}));  // added onto
    for (LossShape s : kLossShapes) {
      const size_t count = static_cast<size_t>(s.n) * s.classes;
      const std::vector<int32_t> labels = loss_labels(s.n, s.classes);
      void* d_dz = half ? static_cast<void*>(r.upload(test::to_bits(std::vector<float>(count, std::nanf("")), t)))
                        : r.garbage(count);
      const void* d_z = half ? static_cast<const void*>(r.upload(test::to_bits(logits(s.n, s.classes), t)))
                             : r.upload(logits(s.n, s.classes));
      r.be.softmax_xent_mix_totals(t, s.n, s.classes, d_z, r.upload(labels),
                                   r.upload(loss_draws(s.n, s.classes, labels)), 0.1f, scale(s.n), d_dz, d_totals);
      if (half)
        r.output("dlogits n " + std::to_string(s.n), t, d_dz, count, dtol);
      else
        r.output("dlogits n " + std::to_string(s.n), static_cast<const float*>(d_dz), count, dtol);
    }
    const LossTotals lt = r.download(d_totals, 1)[0];
    r.output_host("loss sum", {lt.loss_sum}, ltol);
    r.output_host("correct", {static_cast<double>(lt.correct)}, kExact);
  }, [=](Run& r) {
    oracle::Xent total{0.5, 3, {}};
    for (LossShape s : kLossShapes) {
      const std::vector<int32_t> labels = loss_labels(s.n, s.classes);
      const std::vector<float> z32 = logits(s.n, s.classes);
      const std::vector<double> z = half ? oracle::through16(t, z32) : std::vector<double>(z32.begin(), z32.end());
      const oracle::Xent o = oracle::soft_target_xent(
          s.n, s.classes, z, soft_targets(s.n, s.classes, labels, loss_draws(s.n, s.classes, labels), 0.1), labels,
          scale(s.n));
      r.output_host("dlogits n " + std::to_string(s.n), half ? oracle::through16(t, o.dlogits) : o.dlogits, dtol);
      total.loss_sum += o.loss_sum;
      total.correct += o.correct;
    }
    r.output_host("loss sum", {total.loss_sum}, ltol);
    r.output_host("correct", {static_cast<double>(total.correct)}, kExact);
  }});
}

}  // namespace

CNN_SWEEP_CASES(mix) {
  add_mix_images_cases();
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) add_xent_mix_case(t);
}

}  // namespace cnn::sweep
