// CudaBackend: the Backend interface on one CUDA device (or the SIMT emulator), custom kernels only.
// Kernels run in order on one compute stream; host->device uploads are staged through two pinned buffers
// and copied on a second stream, so a batch upload overlaps kernels still running from earlier work.
#include <cstring>

#include "kernels/cuda_arena.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_ops.h"
#include "src/base/error.h"

namespace cnn {
namespace CNN_CUDA_NS {

void cuda_failed(const char* expr, cudaError_t err, const char* file, int line) {
  std::string msg = strprintf("CUDA error %s (%s) from %s at %s:%d", cudaGetErrorName(err), cudaGetErrorString(err),
                              expr, file, line);
#if CNN_SIMT_EMULATED
  const std::string detail = simt::last_error_message();
  if (!detail.empty()) msg += "\n  SIMT emulator: " + detail;
#endif
  fatal(kExitFailure, msg);
}

int multiprocessor_count() {
  // Per device (ranks may bind different GPUs; the emulator's count can change between tests), looked up once.
  static thread_local int cached_for = -1, count = 0;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev != cached_for || CNN_SIMT_EMULATED) {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    count = n > 0 ? n : 1;
    cached_for = dev;
  }
  return count;
}

namespace {
bool g_deterministic = false;
}  // namespace

void set_deterministic_reductions(bool on) { g_deterministic = on; }
bool deterministic_reductions() { return g_deterministic; }

namespace {

constexpr size_t kStagingBytes = 4u << 20;  // per pinned buffer; larger uploads go in pieces
constexpr size_t kArenaChunkBytes = 64u << 20;

// What softmax_xent's kernel accumulates on the device and the host reads back.
struct LossTotals {
  double loss_sum;
  unsigned long long correct;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::string name) : name_(std::move(name)), arena_(kArenaChunkBytes) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming));
    for (int i = 0; i < 2; ++i) {
      CUDA_CHECK(cudaMallocHost(&staging_[i], kStagingBytes));
      CUDA_CHECK(cudaEventCreateWithFlags(&staging_free_[i], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaMallocHost(&h_totals_, sizeof(LossTotals)));
    d_totals_ = static_cast<LossTotals*>(arena_.alloc(sizeof(LossTotals)));
  }

  ~CudaBackend() override {
    // Best effort: after a fault the device may refuse; the process is ending anyway.
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    arena_.release(d_totals_);
    arena_.release(work_);
    cudaFreeHost(h_totals_);
    for (int i = 0; i < 2; ++i) {
      cudaFreeHost(staging_[i]);
      cudaEventDestroy(staging_free_[i]);
    }
    cudaEventDestroy(compute_mark_);
    cudaEventDestroy(copy_done_);
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(copy_stream_);
  }

  std::string name() const override { return name_; }

  void* alloc(size_t bytes) override { return arena_.alloc(bytes); }
  void release(void* p) override { arena_.release(p); }

  void upload(void* dst, const void* host_src, size_t bytes) override {
    // The copy must not overtake kernels already queued that may still read dst.
    CUDA_CHECK(cudaEventRecord(compute_mark_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, compute_mark_, 0));
    for (size_t done = 0; done < bytes;) {
      const size_t len = bytes - done < kStagingBytes ? bytes - done : kStagingBytes;
      const int b = next_staging_;
      next_staging_ ^= 1;
      CUDA_CHECK(cudaEventSynchronize(staging_free_[b]));  // its previous copy has left the buffer
      std::memcpy(staging_[b], static_cast<const char*>(host_src) + done, len);
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, staging_[b], len, cudaMemcpyHostToDevice,
                                 copy_stream_));
      CUDA_CHECK(cudaEventRecord(staging_free_[b], copy_stream_));
      done += len;
    }
    CUDA_CHECK(cudaEventRecord(copy_done_, copy_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, copy_done_, 0));
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void fill(float* x, size_t n, float value) override { CUDA_CHECK(fill_cuda(n, value, x, stream_)); }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void conv2d_forward(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) override {
    CUDA_CHECK(conv2d_forward_cuda(d, x, w, b, y, stream_));
  }
  void conv2d_backward_data(const ConvDesc& d, const float* dy, const float* w, float* dx) override {
    CUDA_CHECK(conv2d_backward_data_cuda(d, dy, w, dx, stream_));
  }
  void conv2d_backward_filter(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) override {
    CUDA_CHECK(conv2d_backward_filter_cuda(d, x, dy, dw, db, stream_));
  }
  void linear_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) override {
    CUDA_CHECK(linear_forward_cuda(m, k, n, x, w, b, y, stream_));
  }
  void linear_backward_data(int m, int k, int n, const float* dy, const float* w, float* dx) override {
    CUDA_CHECK(linear_backward_data_cuda(m, k, n, dy, w, dx, stream_));
  }
  void linear_backward_weight(int m, int k, int n, const float* x, const float* dy, float* dw, float* db) override {
    CUDA_CHECK(linear_backward_weight_cuda(m, k, n, x, dy, dw, db, stream_));
  }
  void relu_forward(size_t n, const float* x, float* y) override { CUDA_CHECK(relu_forward_cuda(n, x, y, stream_)); }
  void relu_backward(size_t n, const float* y, const float* dy, float* dx) override {
    CUDA_CHECK(relu_backward_cuda(n, y, dy, dx, stream_));
  }
  void maxpool_forward(const PoolDesc& d, const float* x, float* y, int32_t* argmax) override {
    CUDA_CHECK(maxpool_forward_cuda(d, x, y, argmax, stream_));
  }
  void maxpool_backward(const PoolDesc& d, const float* dy, const int32_t* argmax, float* dx) override {
    CUDA_CHECK(maxpool_backward_cuda(d, dy, argmax, dx, stream_));
  }
  void softmax_xent(int n, int classes, const float* logits, const int32_t* labels, float eps, float scale,
                    float* dlogits, double* host_loss_sum, int64_t* host_correct) override {
    CUDA_CHECK(cudaMemsetAsync(d_totals_, 0, sizeof(LossTotals), stream_));
    CUDA_CHECK(softmax_xent_cuda(n, classes, logits, labels, eps, scale, dlogits, &d_totals_->loss_sum,
                                 &d_totals_->correct, stream_));
    CUDA_CHECK(cudaMemcpyAsync(h_totals_, d_totals_, sizeof(LossTotals), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    *host_loss_sum += h_totals_->loss_sum;
    *host_correct += static_cast<int64_t>(h_totals_->correct);
  }
  void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                  bool nesterov) override {
    CUDA_CHECK(sgd_update_cuda(n, w, g, v, lr, momentum, wd, nesterov, stream_));
  }

  void batchnorm_forward_train(int rows, int c, const float* x, const float* gamma, const float* beta, float eps,
                               float momentum, float* y, float* save_mean, float* save_invstd, float* running_mean,
                               float* running_var) override {
    CUDA_CHECK(batchnorm_forward_train_cuda(rows, c, x, gamma, beta, eps, momentum, y, save_mean, save_invstd,
                                            running_mean, running_var, workspace(batchnorm_work_bytes(c)), stream_));
  }
  void batchnorm_forward_infer(int rows, int c, const float* x, const float* gamma, const float* beta,
                               const float* running_mean, const float* running_var, float eps, float* y) override {
    CUDA_CHECK(batchnorm_forward_infer_cuda(rows, c, x, gamma, beta, running_mean, running_var, eps, y,
                                            workspace(batchnorm_work_bytes(c)), stream_));
  }
  void batchnorm_backward(int rows, int c, const float* x, const float* dy, const float* gamma,
                          const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                          float* dbeta) override {
    CUDA_CHECK(batchnorm_backward_cuda(rows, c, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta,
                                       workspace(batchnorm_work_bytes(c)), stream_));
  }
  void dropout_forward(int n, size_t per_sample, const float* x, float p, uint64_t key, const int64_t* ids, float* y,
                       uint8_t* mask) override {
    CUDA_CHECK(dropout_forward_cuda(n, per_sample, x, p, key, ids, y, mask, stream_));
  }
  void dropout_backward(size_t count, float p, const float* dy, const uint8_t* mask, float* dx) override {
    CUDA_CHECK(dropout_backward_cuda(count, p, dy, mask, dx, stream_));
  }
  void avgpool_forward(const PoolDesc& d, const float* x, float* y) override {
    CUDA_CHECK(avgpool_forward_cuda(d, x, y, stream_));
  }
  void avgpool_backward(const PoolDesc& d, const float* dy, float* dx) override {
    CUDA_CHECK(avgpool_backward_cuda(d, dy, dx, stream_));
  }
  void add_relu_forward(size_t n, const float* a, const float* b, float* y) override {
    CUDA_CHECK(add_relu_forward_cuda(n, a, b, y, stream_));
  }
  void axpy(size_t n, float alpha, const float* x, float* y) override { CUDA_CHECK(axpy_cuda(n, alpha, x, y, stream_)); }
  void scale(size_t n, float alpha, float* x) override { CUDA_CHECK(scale_cuda(n, alpha, x, stream_)); }
  double sum_squares(size_t n, const float* x) override {
    CUDA_CHECK(cudaMemsetAsync(&d_totals_->loss_sum, 0, sizeof(double), stream_));
    CUDA_CHECK(sum_squares_cuda(n, x, &d_totals_->loss_sum, stream_));
    CUDA_CHECK(cudaMemcpyAsync(h_totals_, d_totals_, sizeof(LossTotals), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h_totals_->loss_sum;
  }
  void shortcut_pad_forward(int n, int h, int w, int c, int stride, int k, const float* x, float* y) override {
    CUDA_CHECK(shortcut_pad_forward_cuda(n, h, w, c, stride, k, x, y, stream_));
  }
  void shortcut_pad_backward(int n, int h, int w, int c, int stride, int k, const float* dy, float* dx) override {
    CUDA_CHECK(shortcut_pad_backward_cuda(n, h, w, c, stride, k, dy, dx, stream_));
  }
  void adamw_update(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                    float eps, float wd, float bc1, float bc2) override {
    CUDA_CHECK(adamw_update_cuda(n, w, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2, stream_));
  }

 private:
  // Scratch for multi-kernel ops, grown on demand. Kernels run in stream order, so one buffer serves all.
  void* workspace(size_t bytes) {
    if (bytes > work_bytes_) {
      arena_.release(work_);
      work_ = arena_.alloc(bytes);
      work_bytes_ = bytes;
    }
    return work_;
  }

  std::string name_;
  DeviceArena arena_;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr, copy_done_ = nullptr, staging_free_[2] = {nullptr, nullptr};
  void* staging_[2] = {nullptr, nullptr};
  int next_staging_ = 0;
  LossTotals* h_totals_ = nullptr;  // pinned
  LossTotals* d_totals_ = nullptr;
  void* work_ = nullptr;
  size_t work_bytes_ = 0;
};

}  // namespace
}  // namespace CNN_CUDA_NS

#if CNN_SIMT_EMULATED
std::unique_ptr<Backend> make_emu_backend() { return std::make_unique<emu::CudaBackend>("emu"); }
#else
std::unique_ptr<Backend> make_cuda_backend(int local_rank) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    raise(kExitFailure, "--device cuda: no usable GPU (cudaGetDeviceCount: %s: %s); check the NVIDIA driver and "
          "CUDA_VISIBLE_DEVICES, or use --device cpu (or emu, the SIMT emulator)", cudaGetErrorName(err),
          cudaGetErrorString(err));
  if (count == 0)
    raise(kExitFailure, "--device cuda: no GPU visible to this process (check CUDA_VISIBLE_DEVICES and the job's GPU "
          "allocation), or use --device cpu");
  CUDA_CHECK(cudaSetDevice(local_rank % count));
  return std::make_unique<gpu::CudaBackend>("cuda");
}
#endif

}  // namespace cnn
