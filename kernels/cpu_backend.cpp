// CpuBackend: host memory and the CPU kernels of kernels/*_cpu.cpp.
#include <cstdlib>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/backend.h"
#include "kernels/conv2d.h"
#include "kernels/linear.h"
#include "kernels/loss.h"
#include "kernels/optimizer.h"
#include "kernels/pooling.h"
#include "src/error.h"

namespace cnn {

namespace {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads) : threads_(threads) {}
  std::string name() const override { return "cpu"; }

  void* alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
      raise(kExitFailure, "out of host memory allocating %.1f MiB; use a smaller --train.batch or model",
            bytes / 1048576.0);
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill(float* x, size_t n, float v) override {
    for (size_t i = 0; i < n; ++i) x[i] = v;
  }
  void synchronize() override {}

  void conv2d_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) override {
    conv2d_forward_cpu(d, x, w, b, y);
  }
  void conv2d_backward_data(const ConvDesc& d, const float* dy, const float* w, float* dx) override {
    conv2d_backward_data_cpu(d, dy, w, dx);
  }
  void conv2d_backward_filter(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) override {
    conv2d_backward_filter_cpu(d, x, dy, dw, db);
  }
  void linear_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) override {
    linear_forward_cpu(m, k, n, x, w, b, y);
  }
  void linear_backward_data(int m, int k, int n, const float* dy, const float* w, float* dx) override {
    linear_backward_data_cpu(m, k, n, dy, w, dx);
  }
  void linear_backward_weight(int m, int k, int n, const float* x, const float* dy, float* dw, float* db) override {
    linear_backward_weight_cpu(m, k, n, x, dy, dw, db);
  }
  void relu_forward(size_t n, const float* x, float* y) override { relu_forward_cpu(n, x, y); }
  void relu_backward(size_t n, const float* y, const float* dy, float* dx) override {
    relu_backward_cpu(n, y, dy, dx);
  }
  void maxpool_forward(const PoolDesc& d, const float* x, float* y, int32_t* argmax) override {
    maxpool_forward_cpu(d, x, y, argmax);
  }
  void maxpool_backward(const PoolDesc& d, const float* dy, const int32_t* argmax, float* dx) override {
    maxpool_backward_cpu(d, dy, argmax, dx);
  }
  void softmax_xent(int n, int classes, const float* logits, const int32_t* labels, float eps, float scale,
                    float* dlogits, double* loss_sum, int64_t* correct) override {
    softmax_xent_cpu(n, classes, logits, labels, eps, scale, dlogits, loss_sum, correct);
  }
  void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                  bool nesterov) override {
    sgd_update_cpu(n, w, g, v, lr, momentum, wd, nesterov);
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace cnn
