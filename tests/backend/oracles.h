// Independent oracles of the backend sweep (Case::oracle, tests/backend/sweep.h) for the ops whose reference
// kernel is what the fast CPU backend runs itself: each computes what kernels/backend.h defines, in double
// precision, straight from the definition, and calls no kernel (no *_cpu function, no dtype.h conversion), so
// that a bug in a reference kernel fails the CPU targets instead of being compared with itself.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/mix_images.h"

namespace cnn::sweep::oracle {

// The 16-bit formats from their definitions: IEEE binary16 (1 sign, 5 exponent, 10 fraction bits) and
// bfloat16 (1, 8, 7). decode16 is exact; round16 rounds to the nearest representable value, ties to the even
// pattern, and past the largest finite value (from halfway to the next power of two on) to infinity.
double decode16(DType t, uint16_t bits);
uint16_t round16(DType t, double v);
// x rounded to t and widened back: what a backend receives when a case uploads x in 16 bits, or an exact
// result as a 16-bit output holds it.
std::vector<double> through16(DType t, const std::vector<double>& x);
std::vector<double> through16(DType t, const std::vector<float>& x);

// Softmax cross-entropy with label smoothing eps over logits [n, classes]: the sum of the n losses
// -sum_j q_j log softmax(z)_j (q: 1 - eps + eps/classes on the label, eps/classes elsewhere), the rows whose
// first largest logit is the label, and dlogits = scale * (softmax(z) - q).
struct Xent {
  double loss_sum = 0;
  int64_t correct = 0;
  std::vector<double> dlogits;
};
Xent softmax_xent(int n, int classes, const std::vector<double>& logits, const std::vector<int32_t>& labels,
                  double eps, double scale);

// Synchronised batch norm over x [rows, c] (kernels/backend.h, "Data-parallel steps").
// [sum of x per channel, sum of x^2 per channel, rows].
std::vector<double> batchnorm_stats(int rows, int c, const std::vector<float>& x);
struct BnForward {
  std::vector<double> y, mean, invstd, running_mean, running_var;
};
// With the statistics `stats` over stats[2c] rows; running_* are the values before the update.
BnForward batchnorm_forward_from_stats(int rows, int c, const std::vector<float>& x, const std::vector<double>& stats,
                                       const std::vector<float>& gamma, const std::vector<float>& beta, double eps,
                                       double momentum, const std::vector<float>& running_mean,
                                       const std::vector<float>& running_var);
// [sum dy per channel, sum dy * xhat per channel, rows], xhat = (x - mean) * invstd.
std::vector<double> batchnorm_backward_sums(int rows, int c, const std::vector<float>& x, const std::vector<float>& dy,
                                            const std::vector<float>& mean, const std::vector<float>& invstd);
struct BnBackward {
  std::vector<double> dx, dgamma, dbeta;
};
// dgamma/dbeta: the values accumulated onto.
BnBackward batchnorm_backward_from_sums(int rows, int c, const std::vector<float>& x, const std::vector<float>& dy,
                                        const std::vector<float>& gamma, const std::vector<float>& mean,
                                        const std::vector<float>& invstd, const std::vector<double>& local,
                                        const std::vector<double>& global, const std::vector<float>& dgamma,
                                        const std::vector<float>& dbeta);

// upload_images' float batch [n, h, w, c]: the crop/flip read (zero outside the image), the rotation (a tent
// filter over the cropped image extended by zeros), brightness, contrast towards the image's mean grey level
// and saturation towards each pixel's, each clamped to [0, 255], (v - mean) / std, then the erase rectangle set
// to 0 (kernels/image_prep.h), all in double.
std::vector<double> prepare_images(const ImageBatch& b);

// Mixup/cutmix (kernels/mix_images.h) of x [n, h, w, c] in double: sample i takes from i ^ 1's original values,
// inside its box (box_h > 0) or blended lam : 1 - lam.
std::vector<double> mix_images(int n, int h, int w, int c, const std::vector<float>& x, const std::vector<MixDraw>& d);
// Cross-entropy with soft targets q [n, classes]: the sum over rows of -sum_j q_j log softmax(z)_j, the rows
// whose first largest logit is labels[i], and dlogits = scale * (softmax(z) - q).
Xent soft_target_xent(int n, int classes, const std::vector<double>& logits, const std::vector<double>& q,
                      const std::vector<int32_t>& labels, double scale);

// The parameterised activations (Backend::activation_forward) from ONNX's definitions, and the derivatives
// their backward multiplies dy by (kernels/activation.h's table: PyTorch's choice at the kinks), in double.
double activation(const Activation& a, double x);
double activation_derivative(const Activation& a, double x);

// Average pooling (Backend::avgpool_forward) straight from ONNX's AveragePool: each output the mean of its
// window's taps inside the input, divided by their count, or with d.count_include_pad by the count of the
// window's positions inside the padded input; and the backward, dx = the sum over the windows containing an
// input of dy / divisor.
std::vector<double> avgpool_forward(const PoolDesc& d, const std::vector<float>& x);
std::vector<double> avgpool_backward(const PoolDesc& d, const std::vector<float>& dy);

// Convolution (Backend::conv2d_*) from its definition, in double: y[n,p,q,k] = b[k] + the sum over r, s and the
// input channels c of k's group of x[n, p*stride_h - pad_h + r*dilation_h, q*stride_w - pad_w + s*dilation_w, c]
// * w[k, r, s, c - first channel of the group] (zero outside the input); dx and dw as the adjoints of that sum,
// dw0/db0 the values accumulated onto (db0 empty: no bias gradient).
std::vector<double> conv2d_forward(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b);
std::vector<double> conv2d_backward_data(const ConvDesc& d, const std::vector<float>& dy, const std::vector<float>& w);
struct ConvFilterGrad {
  std::vector<double> dw, db;
};
ConvFilterGrad conv2d_backward_filter(const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& dy,
                                      const std::vector<float>& dw0, const std::vector<float>& db0);

}  // namespace cnn::sweep::oracle
