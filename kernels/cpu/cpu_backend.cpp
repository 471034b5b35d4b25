// CpuBackend: host memory; fast kernels (oneDNN convolution/matmul, OpenMP element-wise ops) or the reference
// kernels of kernels/*_cpu.cpp.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "kernels/activation.h"
#include "kernels/backend.h"
#include "kernels/batchnorm.h"
#include "kernels/batchnorm_sync.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/image_prep.h"
#include "kernels/join.h"
#include "kernels/cpu/fast_cpu.h"
#include "kernels/cpu/graph_fast.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/cpu/host_mixed_backend.h"
#include "kernels/cpu/host_timing.h"
#include "kernels/linear.h"
#include "kernels/loss.h"
#include "kernels/mix_images.h"
#include "kernels/nonfinite.h"
#include "kernels/optimizer.h"
#include "kernels/pooling.h"
#include "src/base/error.h"

namespace cnn {

namespace {

size_t area(size_t rows, size_t cols) { return rows * cols; }
size_t conv_in(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t conv_out(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t conv_filter(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups); }
size_t pool_in(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t pool_out(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.c; }
size_t map_size(int n, int hw, int c) { return static_cast<size_t>(n) * hw * c; }
int concat_width(int k, const int* channels) {
  int width = 0;
  for (int i = 0; i < k; ++i) width += channels[i];
  return width;
}
size_t pad_in(int n, int h, int w, int c) { return static_cast<size_t>(n) * h * w * c; }
size_t pad_out(int n, int h, int w, int stride, int k) {
  return static_cast<size_t>(n) * ((h + stride - 1) / stride) * ((w + stride - 1) / stride) * k;
}

// bf16 convolution and matmul run on oneDNN's bf16 primitives where the CPU runs them natively (native());
// fp16 (no oneDNN CPU kernels), CPUs without bf16 instructions and the reference variant widen to fp32.
class CpuBackend : public HostMixedBackend {
 public:
  CpuBackend(int threads, CpuKernels k) : HostMixedBackend(threads) {
    if (k == CpuKernels::kFast) dnnl_ = std::make_unique<DnnlOps>(threads_);
    native_bf16_ = dnnl_ && dnnl_bf16_unsupported().empty();
  }
  std::string name() const override { return "cpu"; }
  BackendCaps caps() const override { return {}; }

  void* alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = host_alloc(rounded ? rounded : 64, 64);
    if (!p)
      raise(kExitFailure, "out of host memory allocating %.1f MiB; use a smaller --train.batch or model",
            bytes / 1048576.0);
    track_alloc(p, rounded);
    return p;
  }
  void release(void* p) override {
    track_release(p);
    std::free(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill(float* x, size_t n, float v) override {
    if (dnnl_) return fill_fast(threads_, x, n, v);
    for (size_t i = 0; i < n; ++i) x[i] = v;
  }
  void synchronize() override {}
  void set_param_version(uint64_t version) override {
    HostMixedBackend::set_param_version(version);
    if (dnnl_) dnnl_->set_param_version(version);
  }

  // Each op: oneDNN's bf16 primitives where native(t), else as_fp32 (host_mixed_backend.h) around the fast
  // kernels or the reference kernels.
  void conv2d_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) override {
    if (native(t)) return dnnl_->conv_forward(t, d, x, w, b, y);
    as_fp32(t, [&](const float* x32, const float* w32, float* y32) {
      if (dnnl_) return dnnl_->conv_forward(d, x32, w32, b, y32);
      conv2d_forward_cpu(d, x32, w32, b, y32);
    }, In{x, conv_in(d)}, Weights{w, conv_filter(d)}, Out{y, conv_out(d)});
  }
  void conv2d_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override {
    if (native(t)) return dnnl_->conv_backward_data(t, d, dy, w, dx);
    as_fp32(t, [&](const float* dy32, const float* w32, float* dx32) {
      if (dnnl_) return dnnl_->conv_backward_data(d, dy32, w32, dx32);
      conv2d_backward_data_cpu(d, dy32, w32, dx32);
    }, In{dy, conv_out(d)}, Weights{w, conv_filter(d)}, Out{dx, conv_in(d)});
  }
  void conv2d_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                              float* db) override {
    if (native(t)) return dnnl_->conv_backward_filter(t, d, x, dy, dw, db);
    as_fp32(t, [&](const float* x32, const float* dy32) {
      if (dnnl_) return dnnl_->conv_backward_filter(d, x32, dy32, dw, db);
      conv2d_backward_filter_cpu(d, x32, dy32, dw, db);
    }, In{x, conv_in(d)}, In{dy, conv_out(d)});
  }
  void conv2d_backward(DType t, const ConvDesc& d, const void* x, const void* dy, const void* w, float* dw,
                       float* db, void* dx) override {
    if (dnnl_ && (t == DType::kF32 || native(t))) return dnnl_->conv_backward(t, d, x, dy, w, dw, db, dx);
    Backend::conv2d_backward(t, d, x, dy, w, dw, db, dx);
  }
  bool blocked_conv_ok(DType t, const ConvDesc& d) override {
    return dnnl_ && t == DType::kF32 && dnnl_->blocked_ok(d);
  }
  bool conv2d_backward_data_adds(DType t, const ConvDesc& d) override {
    return dnnl_ && t == DType::kF32 && dnnl_->backward_data_adds(t, d);
  }
  void conv2d_backward_data_add(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override {
    if (!conv2d_backward_data_adds(t, d)) return Backend::conv2d_backward_data_add(t, d, dy, w, dx);  // raises
    dnnl_->conv_backward_data_add(t, d, dy, w, dx);
  }
  void linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                      void* y) override {
    if (native(t)) return dnnl_->linear_forward(t, m, k, n, x, w, b, y);
    as_fp32(t, [&](const float* x32, const float* w32, float* y32) {
      if (dnnl_) return dnnl_->linear_forward(m, k, n, x32, w32, b, y32);
      linear_forward_cpu(m, k, n, x32, w32, b, y32);
    }, In{x, area(m, k)}, Weights{w, area(n, k)}, Out{y, area(m, n)});
  }
  void linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) override {
    if (native(t)) return dnnl_->linear_backward_data(t, m, k, n, dy, w, dx);
    as_fp32(t, [&](const float* dy32, const float* w32, float* dx32) {
      if (dnnl_) return dnnl_->linear_backward_data(m, k, n, dy32, w32, dx32);
      linear_backward_data_cpu(m, k, n, dy32, w32, dx32);
    }, In{dy, area(m, n)}, Weights{w, area(n, k)}, Out{dx, area(m, k)});
  }
  void linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                              float* db) override {
    if (native(t)) return dnnl_->linear_backward_weight(t, m, k, n, x, dy, dw, db);
    as_fp32(t, [&](const float* x32, const float* dy32) {
      if (dnnl_) return dnnl_->linear_backward_weight(m, k, n, x32, dy32, dw, db);
      linear_backward_weight_cpu(m, k, n, x32, dy32, dw, db);
    }, In{x, area(m, k)}, In{dy, area(m, n)});
  }
  void relu_forward(DType t, size_t n, const void* x, void* y) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return relu_forward_fast(threads_, n, x32, y32);
      relu_forward_cpu(n, x32, y32);
    }, In{x, n}, Out{y, n});
  }
  void relu_backward(DType t, size_t n, const void* y, const void* dy, void* dx) override {
    as_fp32(t, [&](const float* y32, const float* dy32, float* dx32) {
      if (dnnl_) return relu_backward_fast(threads_, n, y32, dy32, dx32);
      relu_backward_cpu(n, y32, dy32, dx32);
    }, In{y, n}, In{dy, n}, Out{dx, n});
  }
  void maxpool_forward(DType t, const PoolDesc& d, const void* x, bool relu, void* y, int32_t* argmax) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return maxpool_forward_fast(threads_, d, x32, relu, y32, argmax);
      maxpool_forward_cpu(d, x32, relu, y32, argmax);
    }, In{x, pool_in(d)}, Out{y, pool_out(d)});
  }
  void maxpool_backward(DType t, const PoolDesc& d, const void* dy, const void* relu_y, const int32_t* argmax,
                        void* dx) override {
    as_fp32(t, [&](const float* dy32, const float* relu_y32, float* dx32) {
      if (dnnl_) return maxpool_backward_fast(threads_, d, dy32, relu_y32, argmax, dx32);
      maxpool_backward_cpu(d, dy32, relu_y32, argmax, dx32);
    }, In{dy, pool_out(d)}, In{relu_y, pool_out(d)}, Out{dx, pool_in(d)});
  }
  void softmax_xent(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps, float scale,
                    void* dlogits, double* loss_sum, int64_t* correct) override {
    as_fp32(t, [&](const float* logits32, float* dlogits32) {
      softmax_xent_cpu(n, classes, logits32, labels, eps, scale, dlogits32, loss_sum, correct);
    }, In{logits, area(n, classes)}, Out{dlogits, area(n, classes)});
  }
  void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                  bool nesterov) override {
    if (gated()) return;
    if (dnnl_) return sgd_update_fast(threads_, n, w, g, v, lr, momentum, wd, nesterov);
    sgd_update_cpu(n, w, g, v, lr, momentum, wd, nesterov);
  }
  void batchnorm_forward_train(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, float eps, float momentum, BnAct act, void* y, uint32_t* relu_mask,
                               float* save_mean, float* save_invstd, float* running_mean,
                               float* running_var) override {
    if (dnnl_ && t == DType::kBF16)
      return batchnorm_forward_train_fast(threads_, rows, c, bf16(x), bf16(residual), gamma, beta, eps, momentum,
                                          act, bf16(y), relu_mask, save_mean, save_invstd, running_mean,
                                          running_var);
    as_fp32(t, [&](const float* x32, const float* residual32, float* y32) {
      if (dnnl_)
        return batchnorm_forward_train_fast(threads_, rows, c, x32, residual32, gamma, beta, eps, momentum, act,
                                            y32, relu_mask, save_mean, save_invstd, running_mean, running_var);
      batchnorm_forward_train_cpu(rows, c, x32, residual32, gamma, beta, eps, momentum, act, y32, relu_mask,
                                  save_mean, save_invstd, running_mean, running_var);
    }, In{x, area(rows, c)}, In{residual, area(rows, c)}, Out{y, area(rows, c)});
  }
  void batchnorm_forward_infer(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, const float* running_mean, const float* running_var, float eps,
                               BnAct act, void* y) override {
    if (dnnl_ && t == DType::kBF16)
      return batchnorm_forward_infer_fast(threads_, rows, c, bf16(x), bf16(residual), gamma, beta, running_mean,
                                          running_var, eps, act, bf16(y));
    as_fp32(t, [&](const float* x32, const float* residual32, float* y32) {
      if (dnnl_)
        return batchnorm_forward_infer_fast(threads_, rows, c, x32, residual32, gamma, beta, running_mean,
                                            running_var, eps, act, y32);
      batchnorm_forward_infer_cpu(rows, c, x32, residual32, gamma, beta, running_mean, running_var, eps, act, y32);
    }, In{x, area(rows, c)}, In{residual, area(rows, c)}, Out{y, area(rows, c)});
  }
  void batchnorm_backward(DType t, int rows, int c, const void* x, const uint32_t* relu_mask, const void* dy,
                          const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                          void* dresidual, float* dgamma, float* dbeta) override {
    if (dnnl_ && t == DType::kBF16)
      return batchnorm_backward_fast(threads_, rows, c, bf16(x), relu_mask, bf16(dy), gamma, save_mean, save_invstd,
                                     bf16(dx), bf16(dresidual), dgamma, dbeta);
    as_fp32(t, [&](const float* x32, const float* dy32, float* dx32, float* dresidual32) {
      if (dnnl_)
        return batchnorm_backward_fast(threads_, rows, c, x32, relu_mask, dy32, gamma, save_mean, save_invstd, dx32,
                                       dresidual32, dgamma, dbeta);
      batchnorm_backward_cpu(rows, c, x32, relu_mask, dy32, gamma, save_mean, save_invstd, dx32, dresidual32, dgamma,
                             dbeta);
    }, In{x, area(rows, c)}, In{dy, area(rows, c)}, Out{dx, area(rows, c)}, Out{dresidual, area(rows, c)});
  }
  // Batch norm over operands in their own layouts: the fast fp32 kernels (kernels/cpu/batchnorm_blocked.cpp).
  bool blocked_batchnorm_ok(DType t) override { return dnnl_ && t == DType::kF32; }
  void batchnorm_forward_train_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                      const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                      void* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                      float* running_mean, float* running_var) override {
    if (!blocked_batchnorm_ok(t))
      return Backend::batchnorm_forward_train_layout(t, s, x, residual, gamma, beta, eps, momentum, act, y,
                                                     relu_mask, save_mean, save_invstd, running_mean, running_var);
    cnn::batchnorm_forward_train_layout(threads_, s, f32(x), f32(residual), gamma, beta, eps, momentum, act, f32(y),
                                        relu_mask, save_mean, save_invstd, running_mean, running_var);
  }
  void batchnorm_forward_infer_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                      const float* gamma, const float* beta, const float* running_mean,
                                      const float* running_var, float eps, BnAct act, void* y) override {
    if (!blocked_batchnorm_ok(t))
      return Backend::batchnorm_forward_infer_layout(t, s, x, residual, gamma, beta, running_mean, running_var, eps,
                                                     act, y);
    cnn::batchnorm_forward_infer_layout(threads_, s, f32(x), f32(residual), gamma, beta, running_mean, running_var,
                                        eps, act, f32(y));
  }
  void batchnorm_backward_layout(DType t, const BnShape& s, const void* x, const uint32_t* relu_mask, const void* dy,
                                 const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                                 void* dresidual, float* dgamma, float* dbeta) override {
    if (!blocked_batchnorm_ok(t))
      return Backend::batchnorm_backward_layout(t, s, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual,
                                                dgamma, dbeta);
    cnn::batchnorm_backward_layout(threads_, s, f32(x), relu_mask, f32(dy), gamma, save_mean, save_invstd, f32(dx),
                                   f32(dresidual), dgamma, dbeta);
  }
  void dropout_forward(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key, const int64_t* ids,
                       void* y, uint8_t* mask) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return dropout_forward_fast(threads_, n, per_sample, x32, p, key, ids, y32, mask);
      dropout_forward_cpu(n, per_sample, x32, p, key, ids, y32, mask);
    }, In{x, n * per_sample}, Out{y, n * per_sample});
  }
  void dropout_backward(DType t, size_t count, float p, const void* dy, const uint8_t* mask, void* dx) override {
    as_fp32(t, [&](const float* dy32, float* dx32) {
      if (dnnl_) return dropout_backward_fast(threads_, count, p, dy32, mask, dx32);
      dropout_backward_cpu(count, p, dy32, mask, dx32);
    }, In{dy, count}, Out{dx, count});
  }
  void avgpool_forward(DType t, const PoolDesc& d, const void* x, void* y) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return avgpool_forward_fast(threads_, d, x32, y32);
      avgpool_forward_cpu(d, x32, y32);
    }, In{x, pool_in(d)}, Out{y, pool_out(d)});
  }
  void avgpool_backward(DType t, const PoolDesc& d, const void* dy, void* dx) override {
    as_fp32(t, [&](const float* dy32, float* dx32) {
      if (dnnl_) return avgpool_backward_fast(threads_, d, dy32, dx32);
      avgpool_backward_cpu(d, dy32, dx32);
    }, In{dy, pool_out(d)}, Out{dx, pool_in(d)});
  }
  void axpy(DType t, size_t n, float alpha, const void* x, void* y) override {
    if (dnnl_ && t == DType::kBF16) return axpy_fast(threads_, n, alpha, bf16(x), bf16(y));
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return axpy_fast(threads_, n, alpha, x32, y32);
      axpy_cpu(n, alpha, x32, y32);
    }, In{x, n}, InOut{y, n});
  }
  void scale(size_t n, float alpha, float* x) override {
    if (dnnl_) return scale_fast(threads_, n, alpha, x);
    scale_cpu(n, alpha, x);
  }
  double sum_squares(size_t n, const float* x) override {
    if (dnnl_) return sum_squares_fast(threads_, n, x);
    return sum_squares_cpu(n, x);
  }
  void shortcut_pad_forward(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                            void* y) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return shortcut_pad_forward_fast(threads_, n, h, w, c, stride, k, x32, y32);
      shortcut_pad_forward_cpu(n, h, w, c, stride, k, x32, y32);
    }, In{x, pad_in(n, h, w, c)}, Out{y, pad_out(n, h, w, stride, k)});
  }
  void shortcut_pad_backward_add(DType t, int n, int h, int w, int c, int stride, int k, const void* dy,
                                 void* dx) override {
    as_fp32(t, [&](const float* dy32, float* dx32) {
      if (dnnl_) return shortcut_pad_backward_add_fast(threads_, n, h, w, c, stride, k, dy32, dx32);
      shortcut_pad_backward_add_cpu(n, h, w, c, stride, k, dy32, dx32);
    }, In{dy, pad_out(n, h, w, stride, k)}, InOut{dx, pad_in(n, h, w, c)});
  }
  void adamw_update(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                    float eps, float wd, float bc1, float bc2) override {
    if (gated()) return;
    if (dnnl_) return adamw_update_fast(threads_, n, w, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2);
    adamw_update_cpu(n, w, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2);
  }
  void upload_images(const ImageBatch& b, float* x, int32_t* labels, int64_t* ids) override {
    prepare_images_cpu(b, x);
    std::memcpy(labels, b.labels, sizeof(int32_t) * b.n);
    if (ids && b.ids) std::memcpy(ids, b.ids, sizeof(int64_t) * b.n);
  }

  void count_nonfinite(size_t n, const float* x, int64_t base, int64_t* d_stats) override {
    if (dnnl_) return count_nonfinite_fast(threads_, n, x, base, d_stats);
    count_nonfinite_cpu(n, x, base, d_stats);
  }
  void set_update_gate(const int64_t* d_flag) override { gate_ = d_flag; }
  std::unique_ptr<PhaseTimer> make_phase_timer() override { return make_host_phase_timer(); }
  MemoryUse memory_use() const override { return mem_; }
  std::unique_ptr<HostMirror> make_host_mirror(const void* d_src, size_t bytes) override {
    return cnn::make_host_mirror(d_src, bytes);
  }
  void softmax_xent_totals(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps,
                           float scale, void* dlogits, LossTotals* totals) override {
    double loss = 0;
    int64_t correct = 0;
    softmax_xent(t, n, classes, logits, labels, eps, scale, dlogits, &loss, &correct);
    totals->loss_sum += loss;
    totals->correct += static_cast<unsigned long long>(correct);
  }
  void batchnorm_stats(int rows, int c, const float* x, double* stats) override {
    batchnorm_stats_cpu(rows, c, x, stats);
  }
  void batchnorm_forward_from_stats(int rows, int c, const float* x, const double* stats, const float* gamma,
                                    const float* beta, float eps, float momentum, float* y, float* save_mean,
                                    float* save_invstd, float* running_mean, float* running_var) override {
    batchnorm_forward_from_stats_cpu(rows, c, x, stats, gamma, beta, eps, momentum, y, save_mean, save_invstd,
                                     running_mean, running_var);
  }
  void batchnorm_backward_sums(int rows, int c, const float* x, const float* dy, const float* save_mean,
                               const float* save_invstd, double* sums) override {
    batchnorm_backward_sums_cpu(rows, c, x, dy, save_mean, save_invstd, sums);
  }
  void batchnorm_backward_from_sums(int rows, int c, const float* x, const float* dy, const float* gamma,
                                    const float* save_mean, const float* save_invstd, const double* local_sums,
                                    const double* global_sums, float* dx, float* dgamma, float* dbeta) override {
    batchnorm_backward_from_sums_cpu(rows, c, x, dy, gamma, save_mean, save_invstd, local_sums, global_sums, dx,
                                     dgamma, dbeta);
  }

  void mix_images(int n, int h, int w, int c, const MixDraw* draws, float* x) override {
    CNN_CHECK(n % 2 == 0, "mix_images: %d samples, an odd count leaves a sample without its partner", n);
    mix_images_cpu(n, h, w, c, draws, x);
  }
  void softmax_xent_mix_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                               const MixDraw* mix, float eps, float scale, void* dlogits, LossTotals* totals) override {
    double loss = 0;
    int64_t correct = 0;
    as_fp32(t, [&](const float* logits32, float* dlogits32) {
      softmax_xent_mix_cpu(n, classes, logits32, labels, mix, eps, scale, dlogits32, &loss, &correct);
    }, In{logits, area(n, classes)}, Out{dlogits, area(n, classes)});
    totals->loss_sum += loss;
    totals->correct += static_cast<unsigned long long>(correct);
  }

  // Graph-network ops. A gradient that accumulates is read and written (InOut), else only written (Out).
  void activation_forward(DType t, const Activation& a, size_t n, const void* x, void* y) override {
    as_fp32(t, [&](const float* x32, float* y32) {
      if (dnnl_) return activation_forward_fast(threads_, a, n, x32, y32);
      activation_forward_cpu(a, n, x32, y32);
    }, In{x, n}, Out{y, n});
  }
  void activation_backward(DType t, const Activation& a, size_t n, const void* x, const void* dy, void* dx,
                           bool accumulate) override {
    auto fp32 = [&](const float* x32, const float* dy32, float* dx32) {
      if (dnnl_) return activation_backward_fast(threads_, a, n, x32, dy32, dx32, accumulate);
      activation_backward_cpu(a, n, x32, dy32, dx32, accumulate);
    };
    if (accumulate) return as_fp32(t, fp32, In{x, n}, In{dy, n}, InOut{dx, n});
    as_fp32(t, fp32, In{x, n}, In{dy, n}, Out{dx, n});
  }
  void add_forward(DType t, size_t n, const void* a, const void* b, void* y) override {
    as_fp32(t, [&](const float* a32, const float* b32, float* y32) {
      if (dnnl_) return add_forward_fast(threads_, n, a32, b32, y32);
      add_forward_cpu(n, a32, b32, y32);
    }, In{a, n}, In{b, n}, Out{y, n});
  }
  void mul_forward(DType t, int n, int hw, int c, const void* x, const void* s, void* y) override {
    as_fp32(t, [&](const float* x32, const float* s32, float* y32) {
      if (dnnl_) return mul_forward_fast(threads_, n, hw, c, x32, s32, y32);
      mul_forward_cpu(n, hw, c, x32, s32, y32);
    }, In{x, map_size(n, hw, c)}, In{s, area(n, c)}, Out{y, map_size(n, hw, c)});
  }
  void mul_backward(DType t, int n, int hw, int c, const void* x, const void* s, const void* dy, void* dx, void* ds,
                    bool accumulate) override {
    const size_t xs = map_size(n, hw, c), ss = area(n, c);
    auto fp32 = [&](const float* x32, const float* s32, const float* dy32, float* dx32, float* ds32) {
      if (dnnl_) return mul_backward_fast(threads_, n, hw, c, x32, s32, dy32, dx32, ds32, accumulate);
      mul_backward_cpu(n, hw, c, x32, s32, dy32, dx32, ds32, accumulate);
    };
    // Five tensors exceed as_fp32's slots: the gradients go one at a time.
    auto grads = [&](auto dx_arg, auto ds_arg) {
      auto dx_only = [&](const float* dy32, const float* s32, float* dx32) { fp32(nullptr, s32, dy32, dx32, nullptr); };
      auto ds_only = [&](const float* dy32, const float* x32, float* ds32) { fp32(x32, nullptr, dy32, nullptr, ds32); };
      if (dx) as_fp32(t, dx_only, In{dy, xs}, In{s, ss}, dx_arg);
      if (ds) as_fp32(t, ds_only, In{dy, xs}, In{x, xs}, ds_arg);
    };
    if (accumulate) return grads(InOut{dx, xs}, InOut{ds, ss});
    grads(Out{dx, xs}, Out{ds, ss});
  }
  void concat_forward(DType t, int rows, int k, const int* channels, const void* const* x, void* y) override {
    if (dnnl_) return concat_forward_fast(threads_, t, rows, k, channels, x, y);
    const int width = concat_width(k, channels);
    for (int i = 0, offset = 0; i < k; offset += channels[i++])
      as_fp32(t, [&](const float* x32, float* y32) {
        concat_copy_in_cpu(rows, channels[i], width, offset, x32, y32);
      }, In{x[i], area(rows, channels[i])}, InOut{y, area(rows, width)});
  }
  void concat_backward(DType t, int rows, int k, const int* channels, const void* dy, void* const* dx,
                       bool accumulate) override {
    if (dnnl_) return concat_backward_fast(threads_, t, rows, k, channels, dy, dx, accumulate);
    const int width = concat_width(k, channels);
    for (int i = 0, offset = 0; i < k; offset += channels[i++]) {
      if (!dx[i]) continue;
      auto fp32 = [&](const float* dy32, float* dx32) {
        concat_copy_out_cpu(rows, channels[i], width, offset, dy32, dx32, accumulate);
      };
      if (accumulate) as_fp32(t, fp32, In{dy, area(rows, width)}, InOut{dx[i], area(rows, channels[i])});
      else as_fp32(t, fp32, In{dy, area(rows, width)}, Out{dx[i], area(rows, channels[i])});
    }
  }

 private:
  bool native(DType t) const { return native_bf16_ && t == DType::kBF16; }
  // Batch norm and axpy run on bf16 tensors directly (kernels/cpu/batchnorm_fast.cpp, fast_cpu.cpp: no
  // conversion passes).
  static const Bf16* bf16(const void* p) { return static_cast<const Bf16*>(p); }
  static Bf16* bf16(void* p) { return static_cast<Bf16*>(p); }
  static const float* f32(const void* p) { return static_cast<const float*>(p); }
  static float* f32(void* p) { return static_cast<float*>(p); }
  bool gated() const { return gate_ && *gate_ != 0; }
  void track_alloc(void* p, size_t bytes) {
    sizes_[p] = bytes;
    mem_.in_use += bytes;
    mem_.peak = std::max(mem_.peak, mem_.in_use);
  }
  void track_release(void* p) {
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    mem_.in_use -= it->second;
    sizes_.erase(it);
  }

  std::unique_ptr<DnnlOps> dnnl_;  // null: reference kernels
  bool native_bf16_ = false;
  const int64_t* gate_ = nullptr;
  std::unordered_map<const void*, size_t> sizes_;
  MemoryUse mem_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads, CpuKernels kernels) {
  return std::make_unique<CpuBackend>(threads, kernels);
}

std::string cpu_precision_unsupported(DType t) { return t == DType::kBF16 ? dnnl_bf16_unsupported() : ""; }

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  const char* env = std::getenv("CNNTRAIN_CPU_KERNELS");
  const bool ref = env && std::strcmp(env, "reference") == 0;
  return make_cpu_backend(threads, ref ? CpuKernels::kReference : CpuKernels::kFast);
}

}  // namespace cnn
