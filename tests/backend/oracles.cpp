#include "tests/backend/oracles.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cnn::sweep::oracle {

namespace {

// Exponent and fraction widths of a 16-bit format.
struct Format {
  int exp_bits, frac_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t inf() const { return static_cast<uint16_t>(((1 << exp_bits) - 1) << frac_bits); }
};

Format format(DType t) { return t == DType::kF16 ? Format{5, 10} : Format{8, 7}; }

// The magnitudes of the patterns 0 .. inf-1 (every finite non-negative value, increasing with the pattern),
// and one more entry: the next power of two past the largest, where rounding would land without overflow.
const std::vector<double>& magnitudes(DType t) {
  static std::vector<double> table[3];
  std::vector<double>& v = table[static_cast<int>(t)];
  if (v.empty()) {
    const Format f = format(t);
    for (uint16_t p = 0; p < f.inf(); ++p) v.push_back(decode16(t, p));
    v.push_back(std::ldexp(1.0, (1 << f.exp_bits) - 1 - f.bias()));
  }
  return v;
}

}  // namespace

double decode16(DType t, uint16_t bits) {
  const Format f = format(t);
  const int e = (bits >> f.frac_bits) & ((1 << f.exp_bits) - 1);
  const int frac = bits & ((1 << f.frac_bits) - 1);
  const double sign = bits >> 15 ? -1.0 : 1.0;
  if (e == (1 << f.exp_bits) - 1) return frac ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  // Subnormal: 0.frac * 2^(1 - bias); normal: 1.frac * 2^(e - bias).
  if (e == 0) return sign * std::ldexp(frac, 1 - f.bias() - f.frac_bits);
  return sign * std::ldexp((1 << f.frac_bits) + frac, e - f.bias() - f.frac_bits);
}

uint16_t round16(DType t, double v) {
  const Format f = format(t);
  if (std::isnan(v)) return static_cast<uint16_t>(f.inf() | 1u << (f.frac_bits - 1));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  const std::vector<double>& m = magnitudes(t);
  // The last pattern whose magnitude is <= a, and the one after it (inf past the largest finite).
  const size_t below = static_cast<size_t>(std::upper_bound(m.begin(), m.end(), a) - m.begin()) - 1;
  if (below + 1 >= m.size()) return sign | f.inf();
  const double lo = m[below], hi = m[below + 1];
  size_t pick = below;
  if (a - lo > hi - a || (a - lo == hi - a && below % 2 == 1)) pick = below + 1;
  return static_cast<uint16_t>(sign | pick);
}

std::vector<double> through16(DType t, const std::vector<double>& x) {
  std::vector<double> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) v[i] = decode16(t, round16(t, x[i]));
  return v;
}

std::vector<double> through16(DType t, const std::vector<float>& x) {
  return through16(t, std::vector<double>(x.begin(), x.end()));
}

Xent softmax_xent(int n, int classes, const std::vector<double>& logits, const std::vector<int32_t>& labels,
                  double eps, double scale) {
  Xent out;
  out.dlogits.resize(static_cast<size_t>(n) * classes);
  for (int i = 0; i < n; ++i) {
    const double* z = &logits[static_cast<size_t>(i) * classes];
    const int arg = static_cast<int>(std::max_element(z, z + classes) - z);  // the first largest
    const double top = z[arg];
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - top);
    const double log_norm = top + std::log(sum);  // log sum_j exp(z_j)
    for (int j = 0; j < classes; ++j) {
      const double q = eps / classes + (j == labels[i] ? 1.0 - eps : 0.0);
      const double log_p = z[j] - log_norm;
      out.loss_sum -= q * log_p;
      out.dlogits[static_cast<size_t>(i) * classes + j] = scale * (std::exp(log_p) - q);
    }
    out.correct += arg == labels[i];
  }
  return out;
}

std::vector<double> batchnorm_stats(int rows, int c, const std::vector<float>& x) {
  std::vector<double> s(2 * static_cast<size_t>(c) + 1, 0.0);
  for (size_t i = 0; i < static_cast<size_t>(rows) * c; ++i) {
    s[i % c] += x[i];
    s[c + i % c] += static_cast<double>(x[i]) * x[i];
  }
  s[2 * c] = rows;
  return s;
}

BnForward batchnorm_forward_from_stats(int rows, int c, const std::vector<float>& x, const std::vector<double>& stats,
                                       const std::vector<float>& gamma, const std::vector<float>& beta, double eps,
                                       double momentum, const std::vector<float>& running_mean,
                                       const std::vector<float>& running_var) {
  BnForward o;
  const double count = stats[2 * c];
  for (int j = 0; j < c; ++j) {
    const double mean = stats[j] / count;
    const double var = std::max(stats[c + j] / count - mean * mean, 0.0);  // biased
    o.mean.push_back(mean);
    o.invstd.push_back(1.0 / std::sqrt(var + eps));
    o.running_mean.push_back((1 - momentum) * running_mean[j] + momentum * mean);
    o.running_var.push_back((1 - momentum) * running_var[j] + momentum * var * count / (count - 1));
  }
  for (size_t i = 0; i < static_cast<size_t>(rows) * c; ++i) {
    const size_t j = i % c;
    o.y.push_back(gamma[j] * (x[i] - o.mean[j]) * o.invstd[j] + beta[j]);
  }
  return o;
}

std::vector<double> batchnorm_backward_sums(int rows, int c, const std::vector<float>& x, const std::vector<float>& dy,
                                            const std::vector<float>& mean, const std::vector<float>& invstd) {
  std::vector<double> s(2 * static_cast<size_t>(c) + 1, 0.0);
  for (size_t i = 0; i < static_cast<size_t>(rows) * c; ++i) {
    const size_t j = i % c;
    s[j] += dy[i];
    s[c + j] += static_cast<double>(dy[i]) * (static_cast<double>(x[i]) - mean[j]) * invstd[j];
  }
  s[2 * c] = rows;
  return s;
}

BnBackward batchnorm_backward_from_sums(int rows, int c, const std::vector<float>& x, const std::vector<float>& dy,
                                        const std::vector<float>& gamma, const std::vector<float>& mean,
                                        const std::vector<float>& invstd, const std::vector<double>& local,
                                        const std::vector<double>& global, const std::vector<float>& dgamma,
                                        const std::vector<float>& dbeta) {
  BnBackward o;
  for (int j = 0; j < c; ++j) {
    o.dgamma.push_back(dgamma[j] + local[c + j]);
    o.dbeta.push_back(dbeta[j] + local[j]);
  }
  const double count = global[2 * c];
  for (size_t i = 0; i < static_cast<size_t>(rows) * c; ++i) {
    const size_t j = i % c;
    const double xhat = (static_cast<double>(x[i]) - mean[j]) * invstd[j];
    o.dx.push_back(static_cast<double>(gamma[j]) * invstd[j] *
                   (dy[i] - global[j] / count - xhat * global[c + j] / count));
  }
  return o;
}

namespace {

// One image after crop, flip, rotation and brightness: [h, w, c] in 0..255 units.
std::vector<double> geometry_and_brightness(const ImageBatch& b, const uint8_t* img, const ImageAug& a) {
  const auto cropped = [&](int y, int x, int ch) -> double {
    const int sy = y + a.dy, sx = (a.flip ? b.w - 1 - x : x) + a.dx;
    if (y < 0 || y >= b.h || x < 0 || x >= b.w || sy < 0 || sy >= b.h || sx < 0 || sx >= b.w) return 0.0;
    return img[(static_cast<size_t>(sy) * b.w + sx) * b.c + ch];
  };
  const double cs = a.rot_cos, sn = a.rot_sin, cx = (b.w - 1) / 2.0, cy = (b.h - 1) / 2.0;
  std::vector<double> out;
  for (int y = 0; y < b.h; ++y)
    for (int x = 0; x < b.w; ++x) {
      // Where (y, x) comes from: every source pixel within one step in both directions weighs in (tent).
      const double fx = cx + cs * (x - cx) - sn * (y - cy), fy = cy + sn * (x - cx) + cs * (y - cy);
      for (int ch = 0; ch < b.c; ++ch) {
        double v = 0;
        for (int py = static_cast<int>(std::floor(fy)) - 1; py <= std::floor(fy) + 2; ++py)
          for (int px = static_cast<int>(std::floor(fx)) - 1; px <= std::floor(fx) + 2; ++px)
            v += std::max(0.0, 1 - std::fabs(fy - py)) * std::max(0.0, 1 - std::fabs(fx - px)) * cropped(py, px, ch);
        out.push_back(std::clamp(v * a.brightness, 0.0, 255.0));
      }
    }
  return out;
}

double luma(const double* p, int c) { return c == 3 ? 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2] : p[0]; }

}  // namespace

std::vector<double> prepare_images(const ImageBatch& b) {
  std::vector<double> out;
  const size_t image = static_cast<size_t>(b.h) * b.w * b.c;
  for (int i = 0; i < b.n; ++i) {
    const ImageAug a = b.aug ? b.aug[i] : ImageAug{};
    std::vector<double> v = geometry_and_brightness(b, b.pixels + i * image, a);
    double mean_grey = 0;
    for (size_t p = 0; p < v.size(); p += b.c) mean_grey += luma(&v[p], b.c) / (static_cast<double>(b.h) * b.w);
    for (size_t p = 0; p < v.size(); p += b.c) {
      for (int ch = 0; ch < b.c; ++ch)
        v[p + ch] = std::clamp(a.contrast * v[p + ch] + (1 - a.contrast) * mean_grey, 0.0, 255.0);
      const double g = luma(&v[p], b.c);
      for (int ch = 0; b.c == 3 && ch < b.c; ++ch)
        v[p + ch] = std::clamp(a.saturation * v[p + ch] + (1 - a.saturation) * g, 0.0, 255.0);
    }
    for (int y = 0; y < b.h; ++y)
      for (int x = 0; x < b.w; ++x) {
        const bool erased = a.erase_h > 0 && y >= a.erase_y && y < a.erase_y + a.erase_h && x >= a.erase_x &&
                            x < a.erase_x + a.erase_w;
        for (int ch = 0; ch < b.c; ++ch)
          out.push_back(erased ? 0.0 : (v[(static_cast<size_t>(y) * b.w + x) * b.c + ch] - b.mean[ch]) / b.std[ch]);
      }
  }
  return out;
}

std::vector<double> mix_images(int n, int h, int w, int c, const std::vector<float>& x, const std::vector<MixDraw>& d) {
  std::vector<double> out(x.size());
  const size_t image = static_cast<size_t>(h) * w * c;
  for (int i = 0; i < n; ++i)
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int ch = 0; ch < c; ++ch) {
          const size_t e = (static_cast<size_t>(y) * w + xx) * c + ch;
          const double self = x[i * image + e], partner = x[(i ^ 1) * image + e];
          const MixDraw& m = d[i];
          const bool in_box = y >= m.box_y && y < m.box_y + m.box_h && xx >= m.box_x && xx < m.box_x + m.box_w;
          out[i * image + e] = m.box_h > 0 ? (in_box ? partner : self) : m.lam * self + (1.0 - m.lam) * partner;
        }
  return out;
}

Xent soft_target_xent(int n, int classes, const std::vector<double>& logits, const std::vector<double>& q,
                      const std::vector<int32_t>& labels, double scale) {
  Xent out;
  out.dlogits.resize(static_cast<size_t>(n) * classes);
  for (int i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(i) * classes;
    const double* z = &logits[row];
    const int arg = static_cast<int>(std::max_element(z, z + classes) - z);
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - z[arg]);
    const double log_norm = z[arg] + std::log(sum);
    for (int j = 0; j < classes; ++j) {
      const double log_p = z[j] - log_norm;
      out.loss_sum -= q[row + j] * log_p;
      out.dlogits[row + j] = scale * (std::exp(log_p) - q[row + j]);
    }
    out.correct += arg == labels[i];
  }
  return out;
}

double activation(const Activation& a, double x) {
  const double alpha = a.alpha, beta = a.beta, s = 1 / (1 + std::exp(-x));
  switch (a.kind) {
    case ActKind::kLeakyRelu: return x < 0 ? alpha * x : x;
    case ActKind::kClip: return x < alpha ? alpha : x > beta ? beta : x;
    case ActKind::kSigmoid: return s;
    case ActKind::kHardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
    case ActKind::kHardSwish: return x * std::max(0.0, std::min(1.0, (x + 3) / 6));
    case ActKind::kSilu: return x * s;
  }
  return std::nan("");
}

double activation_derivative(const Activation& a, double x) {
  const double alpha = a.alpha, beta = a.beta, s = 1 / (1 + std::exp(-x));
  switch (a.kind) {
    case ActKind::kLeakyRelu: return x > 0 ? 1 : alpha;
    case ActKind::kClip: return alpha < x && x < beta ? 1 : 0;
    case ActKind::kSigmoid: return s * (1 - s);
    case ActKind::kHardSigmoid: return 0 < alpha * x + beta && alpha * x + beta < 1 ? alpha : 0;
    case ActKind::kHardSwish: return x < -3 ? 0 : x > 3 ? 1 : (2 * x + 3) / 6;  // d/dx x(x+3)/6
    case ActKind::kSilu: return s + x * s * (1 - s);
  }
  return std::nan("");
}

namespace {

// Calls f(output index, input index or -1 for a padded position, divisor) for every window position.
template <class F>
void avgpool_windows(const PoolDesc& d, F f) {
  const int P = d.p(), Q = d.q();
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        int inside = 0, padded = 0;
        for (int pass = 0; pass < 2; ++pass)
          for (int i = 0; i < d.r; ++i)
            for (int j = 0; j < d.s; ++j) {
              const int h = p * d.stride - d.pad + i, w = q * d.stride - d.pad + j;
              const bool in = h >= 0 && h < d.h && w >= 0 && w < d.w;
              const bool in_padded = h < d.h + d.pad + d.extra_pad_h && w < d.w + d.pad + d.extra_pad_w;
              if (pass == 0) {
                inside += in;
                padded += in_padded;
              } else if (in) {
                const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * d.c;
                f(o, ((static_cast<size_t>(n) * d.h + h) * d.w + w) * d.c, d.count_include_pad ? padded : inside);
              }
            }
      }
}

}  // namespace

std::vector<double> avgpool_forward(const PoolDesc& d, const std::vector<float>& x) {
  std::vector<double> y(static_cast<size_t>(d.n) * d.p() * d.q() * d.c, 0.0);
  avgpool_windows(d, [&](size_t o, size_t i, int count) {
    for (int c = 0; c < d.c; ++c) y[o + c] += x[i + c] / static_cast<double>(count);
  });
  return y;
}

std::vector<double> avgpool_backward(const PoolDesc& d, const std::vector<float>& dy) {
  std::vector<double> dx(static_cast<size_t>(d.n) * d.h * d.w * d.c, 0.0);
  avgpool_windows(d, [&](size_t o, size_t i, int count) {
    for (int c = 0; c < d.c; ++c) dx[i + c] += dy[o + c] / static_cast<double>(count);
  });
  return dx;
}

namespace {

// Calls f(y index, x index, w index) for every product of the convolution's sum whose input tap lies inside
// the input.
template <class F>
void conv_products(const ConvDesc& d, F&& f) {
  const int kg = d.k / d.groups, cg = d.c / d.groups, P = d.p(), Q = d.q();
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < d.k; ++k)
          for (int r = 0; r < d.r; ++r)
            for (int s = 0; s < d.s; ++s) {
              const int h = p * d.stride_h - d.pad_h + r * d.dilation_h;
              const int w = q * d.stride_w - d.pad_w + s * d.dilation_w;
              if (h < 0 || h >= d.h || w < 0 || w >= d.w) continue;
              for (int c = 0; c < cg; ++c) {
                const size_t yi = ((static_cast<size_t>(n) * P + p) * Q + q) * d.k + k;
                const size_t xi = ((static_cast<size_t>(n) * d.h + h) * d.w + w) * d.c + (k / kg) * cg + c;
                const size_t wi = ((static_cast<size_t>(k) * d.r + r) * d.s + s) * cg + c;
                f(yi, xi, wi);
              }
            }
}

}  // namespace

std::vector<double> conv2d_forward(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b) {
  std::vector<double> y(static_cast<size_t>(d.n) * d.p() * d.q() * d.k, 0.0);
  if (!b.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] = b[i % d.k];
  conv_products(d, [&](size_t yi, size_t xi, size_t wi) { y[yi] += static_cast<double>(x[xi]) * w[wi]; });
  return y;
}

std::vector<double> conv2d_backward_data(const ConvDesc& d, const std::vector<float>& dy,
                                         const std::vector<float>& w) {
  std::vector<double> dx(static_cast<size_t>(d.n) * d.h * d.w * d.c, 0.0);
  conv_products(d, [&](size_t yi, size_t xi, size_t wi) { dx[xi] += static_cast<double>(dy[yi]) * w[wi]; });
  return dx;
}

ConvFilterGrad conv2d_backward_filter(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& dy,
                                      const std::vector<float>& dw0, const std::vector<float>& db0) {
  ConvFilterGrad g{std::vector<double>(dw0.begin(), dw0.end()), std::vector<double>(db0.begin(), db0.end())};
  conv_products(d, [&](size_t yi, size_t xi, size_t wi) { g.dw[wi] += static_cast<double>(dy[yi]) * x[xi]; });
  if (!db0.empty())
    for (size_t i = 0; i < dy.size(); ++i) g.db[i % d.k] += dy[i];
  return g;
}

}  // namespace cnn::sweep::oracle
