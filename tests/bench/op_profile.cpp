#include "tests/bench/op_profile.h"

#include <time.h>

namespace cnn::bench {

namespace {

double seconds(bool cpu_clock) {
  timespec t;
  clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Times one forwarded call: the clock stops after the wrapped backend has finished the op.
class Timed {
 public:
  Timed(OpProfile& p, Backend& be, const char* op) : p_(p), be_(be), op_(op), t0_(seconds(p.cpu_clock())) {}
  ~Timed() {
    be_.synchronize();
    p_.add(op_, seconds(p_.cpu_clock()) - t0_);
  }

 private:
  OpProfile& p_;
  Backend& be_;
  const char* op_;
  double t0_;
};

#define CNN_TIMED(op, call) \
  Timed t_(prof_, be_, op); \
  return be_.call

class ProfilingBackend : public Backend {
 public:
  ProfilingBackend(OpProfile& prof, Backend& be) : prof_(prof), be_(be) {}
  std::string name() const override { return be_.name(); }
  BackendCaps caps() const override { return be_.caps(); }
  void* alloc(size_t bytes) override { return be_.alloc(bytes); }
  void release(void* p) override { be_.release(p); }
  void upload(void* dst, const void* src, size_t bytes) override { CNN_TIMED("upload", upload(dst, src, bytes)); }
  void download(void* dst, const void* src, size_t bytes) override { CNN_TIMED("download", download(dst, src, bytes)); }
  void copy(void* dst, const void* src, size_t bytes) override { CNN_TIMED("copy", copy(dst, src, bytes)); }
  void fill(float* x, size_t n, float v) override { CNN_TIMED("fill", fill(x, n, v)); }
  void synchronize() override { be_.synchronize(); }
  void set_param_version(uint64_t version) override { be_.set_param_version(version); }

  void convert(size_t n, DType from, const void* x, DType to, void* y) override {
    CNN_TIMED("convert", convert(n, from, x, to, y));
  }
  void conv2d_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) override {
    CNN_TIMED("conv2d_forward", conv2d_forward(t, d, x, w, b, y));
  }
  void conv2d_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override {
    CNN_TIMED("conv2d_backward_data", conv2d_backward_data(t, d, dy, w, dx));
  }
  void conv2d_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                              float* db) override {
    CNN_TIMED("conv2d_backward_filter", conv2d_backward_filter(t, d, x, dy, dw, db));
  }
  bool conv2d_backward_data_adds(DType t, const ConvDesc& d) override { return be_.conv2d_backward_data_adds(t, d); }
  void conv2d_backward_data_add(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override {
    CNN_TIMED("conv2d_backward_data_add", conv2d_backward_data_add(t, d, dy, w, dx));
  }
  void linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                      void* y) override {
    CNN_TIMED("linear_forward", linear_forward(t, m, k, n, x, w, b, y));
  }
  void linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) override {
    CNN_TIMED("linear_backward_data", linear_backward_data(t, m, k, n, dy, w, dx));
  }
  void linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                              float* db) override {
    CNN_TIMED("linear_backward_weight", linear_backward_weight(t, m, k, n, x, dy, dw, db));
  }
  void relu_forward(DType t, size_t n, const void* x, void* y) override {
    CNN_TIMED("relu_forward", relu_forward(t, n, x, y));
  }
  void relu_backward(DType t, size_t n, const void* y, const void* dy, void* dx) override {
    CNN_TIMED("relu_backward", relu_backward(t, n, y, dy, dx));
  }
  void maxpool_forward(DType t, const PoolDesc& d, const void* x, bool relu, void* y, int32_t* argmax) override {
    CNN_TIMED("maxpool_forward", maxpool_forward(t, d, x, relu, y, argmax));
  }
  void maxpool_backward(DType t, const PoolDesc& d, const void* dy, const void* relu_y, const int32_t* argmax,
                        void* dx) override {
    CNN_TIMED("maxpool_backward", maxpool_backward(t, d, dy, relu_y, argmax, dx));
  }
  void softmax_xent(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps, float scale,
                    void* dlogits, double* loss_sum, int64_t* correct) override {
    CNN_TIMED("softmax_xent", softmax_xent(t, n, classes, logits, labels, eps, scale, dlogits, loss_sum, correct));
  }
  void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                  bool nesterov) override {
    CNN_TIMED("sgd_update", sgd_update(n, w, g, v, lr, momentum, wd, nesterov));
  }
  void batchnorm_forward_train(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, float eps, float momentum, BnAct act, void* y, uint32_t* relu_mask,
                               float* save_mean, float* save_invstd, float* running_mean,
                               float* running_var) override {
    CNN_TIMED("batchnorm_forward_train", batchnorm_forward_train(t, rows, c, x, residual, gamma, beta, eps, momentum,
                                                                 act, y, relu_mask, save_mean, save_invstd,
                                                                 running_mean, running_var));
  }
  void batchnorm_forward_infer(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, const float* running_mean, const float* running_var, float eps,
                               BnAct act, void* y) override {
    CNN_TIMED("batchnorm_forward_infer", batchnorm_forward_infer(t, rows, c, x, residual, gamma, beta, running_mean,
                                                                 running_var, eps, act, y));
  }
  void batchnorm_backward(DType t, int rows, int c, const void* x, const uint32_t* relu_mask, const void* dy,
                          const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                          void* dresidual, float* dgamma, float* dbeta) override {
    CNN_TIMED("batchnorm_backward", batchnorm_backward(t, rows, c, x, relu_mask, dy, gamma, save_mean, save_invstd,
                                                       dx, dresidual, dgamma, dbeta));
  }
  // Blocked activations as the wrapped backend has them (the net picks its layouts through these), timed
  // under the NHWC ops' names.
  bool blocked_conv_ok(DType t, const ConvDesc& d) override { return be_.blocked_conv_ok(t, d); }
  bool blocked_batchnorm_ok(DType t) override { return be_.blocked_batchnorm_ok(t); }
  void batchnorm_forward_train_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                      const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                      void* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                      float* running_mean, float* running_var) override {
    CNN_TIMED("batchnorm_forward_train", batchnorm_forward_train_layout(t, s, x, residual, gamma, beta, eps, momentum,
        act, y, relu_mask, save_mean, save_invstd, running_mean, running_var));
  }
  void batchnorm_forward_infer_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                      const float* gamma, const float* beta, const float* running_mean,
                                      const float* running_var, float eps, BnAct act, void* y) override {
    CNN_TIMED("batchnorm_forward_infer", batchnorm_forward_infer_layout(t, s, x, residual, gamma, beta, running_mean,
        running_var, eps, act, y));
  }
  void batchnorm_backward_layout(DType t, const BnShape& s, const void* x, const uint32_t* relu_mask, const void* dy,
                                 const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                                 void* dresidual, float* dgamma, float* dbeta) override {
    CNN_TIMED("batchnorm_backward", batchnorm_backward_layout(t, s, x, relu_mask, dy, gamma, save_mean, save_invstd,
        dx, dresidual, dgamma, dbeta));
  }
  void dropout_forward(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key, const int64_t* ids,
                       void* y, uint8_t* mask) override {
    CNN_TIMED("dropout_forward", dropout_forward(t, n, per_sample, x, p, key, ids, y, mask));
  }
  void dropout_backward(DType t, size_t count, float p, const void* dy, const uint8_t* mask, void* dx) override {
    CNN_TIMED("dropout_backward", dropout_backward(t, count, p, dy, mask, dx));
  }
  void avgpool_forward(DType t, const PoolDesc& d, const void* x, void* y) override {
    CNN_TIMED("avgpool_forward", avgpool_forward(t, d, x, y));
  }
  void avgpool_backward(DType t, const PoolDesc& d, const void* dy, void* dx) override {
    CNN_TIMED("avgpool_backward", avgpool_backward(t, d, dy, dx));
  }
  void axpy(DType t, size_t n, float alpha, const void* x, void* y) override {
    CNN_TIMED("axpy", axpy(t, n, alpha, x, y));
  }
  void scale(size_t n, float alpha, float* x) override { CNN_TIMED("scale", scale(n, alpha, x)); }
  double sum_squares(size_t n, const float* x) override { CNN_TIMED("sum_squares", sum_squares(n, x)); }
  void shortcut_pad_forward(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                            void* y) override {
    CNN_TIMED("shortcut_pad_forward", shortcut_pad_forward(t, n, h, w, c, stride, k, x, y));
  }
  void shortcut_pad_backward_add(DType t, int n, int h, int w, int c, int stride, int k, const void* dy,
                                 void* dx) override {
    CNN_TIMED("shortcut_pad_backward_add", shortcut_pad_backward_add(t, n, h, w, c, stride, k, dy, dx));
  }
  void adamw_update(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                    float eps, float wd, float bc1, float bc2) override {
    CNN_TIMED("adamw_update", adamw_update(n, w, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2));
  }
  // The device loss totals and synchronised batch norm (kernels/backend.h).
  void softmax_xent_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                           float label_smoothing, float scale, void* dlogits, LossTotals* totals) override {
    CNN_TIMED("softmax_xent_totals", softmax_xent_totals(t, n, classes, logits, labels, label_smoothing, scale,
                                                         dlogits, totals));
  }
  void batchnorm_stats(int rows, int c, const float* x, double* stats) override {
    CNN_TIMED("batchnorm_stats", batchnorm_stats(rows, c, x, stats));
  }
  void batchnorm_forward_from_stats(int rows, int c, const float* x, const double* stats, const float* gamma,
                                    const float* beta, float eps, float momentum, float* y, float* save_mean,
                                    float* save_invstd, float* running_mean, float* running_var) override {
    CNN_TIMED("batchnorm_forward_from_stats", batchnorm_forward_from_stats(rows, c, x, stats, gamma, beta, eps,
        momentum, y, save_mean, save_invstd, running_mean, running_var));
  }
  void batchnorm_backward_sums(int rows, int c, const float* x, const float* dy, const float* save_mean,
                               const float* save_invstd, double* sums) override {
    CNN_TIMED("batchnorm_backward_sums", batchnorm_backward_sums(rows, c, x, dy, save_mean, save_invstd, sums));
  }
  void batchnorm_backward_from_sums(int rows, int c, const float* x, const float* dy, const float* gamma,
                                    const float* save_mean, const float* save_invstd, const double* local_sums,
                                    const double* global_sums, float* dx, float* dgamma, float* dbeta) override {
    CNN_TIMED("batchnorm_backward_from_sums", batchnorm_backward_from_sums(rows, c, x, dy, gamma, save_mean,
        save_invstd, local_sums, global_sums, dx, dgamma, dbeta));
  }
  void mix_images(int n, int h, int w, int c, const MixDraw* draws, float* x) override {
    CNN_TIMED("mix_images", mix_images(n, h, w, c, draws, x));
  }
  void softmax_xent_mix_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                               const MixDraw* mix, float label_smoothing, float scale, void* dlogits,
                               LossTotals* totals) override {
    CNN_TIMED("softmax_xent_mix_totals", softmax_xent_mix_totals(t, n, classes, logits, labels, mix,
                                                                 label_smoothing, scale, dlogits, totals));
  }
  void set_label(const char* layer) override { be_.set_label(layer); }
  void upload_images(const ImageBatch& b, float* x, int32_t* labels, int64_t* ids) override {
    CNN_TIMED("upload_images", upload_images(b, x, labels, ids));
  }
  void count_nonfinite(size_t n, const float* x, int64_t base, int64_t* d_stats) override {
    CNN_TIMED("count_nonfinite", count_nonfinite(n, x, base, d_stats));
  }
  void set_update_gate(const int64_t* d_flag) override { be_.set_update_gate(d_flag); }
  std::unique_ptr<PhaseTimer> make_phase_timer() override { return be_.make_phase_timer(); }
  MemoryUse memory_use() const override { return be_.memory_use(); }
  std::unique_ptr<HostMirror> make_host_mirror(const void* d_src, size_t bytes) override {
    return be_.make_host_mirror(d_src, bytes);
  }

  void activation_forward(DType t, const Activation& a, size_t n, const void* x, void* y) override {
    CNN_TIMED("activation_forward", activation_forward(t, a, n, x, y));
  }
  void activation_backward(DType t, const Activation& a, size_t n, const void* x, const void* dy, void* dx,
                           bool accumulate) override {
    CNN_TIMED("activation_backward", activation_backward(t, a, n, x, dy, dx, accumulate));
  }
  void add_forward(DType t, size_t n, const void* a, const void* b, void* y) override {
    CNN_TIMED("add_forward", add_forward(t, n, a, b, y));
  }
  void mul_forward(DType t, int n, int hw, int c, const void* x, const void* s, void* y) override {
    CNN_TIMED("mul_forward", mul_forward(t, n, hw, c, x, s, y));
  }
  void mul_backward(DType t, int n, int hw, int c, const void* x, const void* s, const void* dy, void* dx, void* ds,
                    bool accumulate) override {
    CNN_TIMED("mul_backward", mul_backward(t, n, hw, c, x, s, dy, dx, ds, accumulate));
  }
  void concat_forward(DType t, int rows, int k, const int* channels, const void* const* x, void* y) override {
    CNN_TIMED("concat_forward", concat_forward(t, rows, k, channels, x, y));
  }
  void concat_backward(DType t, int rows, int k, const int* channels, const void* dy, void* const* dx,
                       bool accumulate) override {
    CNN_TIMED("concat_backward", concat_backward(t, rows, k, channels, dy, dx, accumulate));
  }

 private:
  OpProfile& prof_;
  Backend& be_;
};

#undef CNN_TIMED

}  // namespace

std::unique_ptr<Backend> OpProfile::wrap(Backend& inner) { return std::make_unique<ProfilingBackend>(*this, inner); }

}  // namespace cnn::bench
