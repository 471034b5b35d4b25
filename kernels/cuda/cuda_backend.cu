// CudaBackend: the Backend interface on one CUDA device (or the SIMT emulator). Kernels run in order on one
// compute stream; host->device uploads are staged through a ring of pinned buffers and copied on a second
// stream, so a batch upload overlaps kernels still running from earlier work. On a GPU, convolutions and linear
// layers go to cuDNN/cuBLASLt first (kernels/cuda/vendor/vendor_libs.h), batch norm only with --cudnn.batchnorm
// true, and to the custom kernels when the library has no algorithm for the problem or --conv.impl custom asks
// for them. Nothing in a training step synchronises the host: loss sums stay on the device (softmax_xent_totals).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/cuda_arena.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_timing.h"
#include "src/base/error.h"
#if !CNN_SIMT_EMULATED
#include "kernels/cuda/driver_check.h"
#include "kernels/cuda/vendor/vendor_libs.h"
#include "kernels/cuda/vendor/vendor_loader.h"
#endif

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

constexpr size_t kStagingBytes = 4u << 20;  // per pinned buffer; larger uploads go in pieces
// A step uploads images, labels and ids: with four buffers, refilling one waits for a copy of the previous
// step (itself queued after that step's kernels), not for the current step's, so the host stays a step ahead.
constexpr int kStagingBuffers = 4;
constexpr size_t kArenaChunkBytes = 64u << 20;

// One slot of the input path: the batch's bytes (normalisation constants, labels, ids, augmentation, pixels)
// in pinned host memory and in device memory. Two slots alternate, so batch k+1's copy never waits for the
// kernels that still read batch k's slot... only for those that read batch k-1's.
struct InputSlot {
  char* host = nullptr;  // pinned
  char* dev = nullptr;   // arena
  size_t bytes = 0;
  cudaEvent_t copied = nullptr;    // the H2D copy out of `host` finished
  cudaEvent_t consumed = nullptr;  // the kernels reading `dev` finished
};

// Offsets of the parts of an input slot, each 256-byte aligned.
struct InputLayout {
  size_t scale_shift, labels, ids, aug, means, pixels, total;
  explicit InputLayout(const ImageBatch& b) {
    auto up = [](size_t x) { return (x + 255) / 256 * 256; };
    scale_shift = 0;
    labels = up(scale_shift + sizeof(float) * 2 * b.c);
    ids = up(labels + sizeof(int32_t) * b.n);
    aug = up(ids + sizeof(int64_t) * b.n);
    means = up(aug + sizeof(ImageAug) * b.n);  // device scratch of the contrast jitter
    pixels = up(means + sizeof(float) * b.n);
    total = up(pixels + static_cast<size_t>(b.n) * b.h * b.w * b.c);
  }
};

// VENDOR(call): the vendor-library call on this backend's libraries, false when there are none (or it
// declined the problem). VENDOR_FIRST(call): return from the op when the library served it.
#if !CNN_SIMT_EMULATED
#define VENDOR(call) (vendor_ && vendor_->call)
#else
#define VENDOR(call) false
#endif
#define VENDOR_FIRST(call) \
  do {                     \
    if (VENDOR(call)) return; \
  } while (0)

#if !CNN_SIMT_EMULATED
void log_to_stderr(const std::string& line) {
  if (is_log_rank()) std::fprintf(stderr, "cnntrain: note%s: %s\n", rank_tag().c_str(), line.c_str());
}
#endif

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::string name, const GpuOptions& opts, bool have_libraries)
      : name_(std::move(name)), arena_(kArenaChunkBytes) {
    // First: refusing --conv.impl cudnn must happen before any resource exists.
    const bool vendor = use_vendor_libraries(opts.conv_impl, have_libraries, name_);
#if !CNN_SIMT_EMULATED
    // cuDNN and cuBLASLt are loaded now, so that a missing one is reported (with --conv.impl custom as the way
    // to train without them) before any resource exists, not at the first convolution. cuBLASLt first: cuDNN
    // opens it by soname, which then finds the loaded copy wherever the search found it.
    if (vendor)
      for (gpu::VendorLib lib : {gpu::VendorLib::kCublasLt, gpu::VendorLib::kCudnn}) gpu::vendor_loader().handle(lib);
#endif
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    register_kernel_settings(stream_, {opts.deterministic, opts.tensor_core_gemm && tensor_cores_allowed_by_env()});
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    arena_.add_stream(stream_);
    arena_.add_stream(copy_stream_);
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming));
    for (int i = 0; i < kStagingBuffers; ++i) {
      CUDA_CHECK(cudaMallocHost(&staging_[i], kStagingBytes));
      CUDA_CHECK(cudaEventCreateWithFlags(&staging_free_[i], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaMallocHost(&h_totals_, sizeof(LossTotals)));
    d_totals_ = static_cast<LossTotals*>(arena_.alloc(sizeof(LossTotals), stream_));
    for (InputSlot& slot : input_) {
      CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&slot.consumed, cudaEventDisableTiming));
    }
#if !CNN_SIMT_EMULATED
    if (vendor) {
      AlgoPolicy policy;
      policy.workspace_cap = opts.workspace_bytes;
      if (policy.workspace_cap == GpuOptions::kWorkspaceAuto) {
        size_t free_bytes = 0, total_bytes = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        policy.workspace_cap = std::max(total_bytes / 16, size_t{512} << 20);
      }
      vendor_bn_ = opts.vendor_batchnorm;
      policy.deterministic = opts.deterministic;
      vendor_ = std::make_unique<gpu::VendorLibs>(stream_, arena_, policy, opts.algo_search, opts.tf32,
                                                  opts.log ? opts.log : log_to_stderr);
    }
#else
    (void)vendor;  // the emulator has no vendor libraries: use_vendor_libraries refused cudnn already
#endif
  }

  ~CudaBackend() override {
    // Best effort: after a fault the device may refuse; the process is ending anyway.
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
#if !CNN_SIMT_EMULATED
    vendor_.reset();
#endif
    arena_.release(d_totals_, stream_);
    arena_.release(work_, stream_);
    for (InputSlot& slot : input_) {
      arena_.release(slot.dev);
      cudaFreeHost(slot.host);
      cudaEventDestroy(slot.copied);
      cudaEventDestroy(slot.consumed);
    }
    cudaFreeHost(h_totals_);
    for (int i = 0; i < kStagingBuffers; ++i) {
      cudaFreeHost(staging_[i]);
      cudaEventDestroy(staging_free_[i]);
    }
    cudaEventDestroy(compute_mark_);
    cudaEventDestroy(copy_done_);
    forget_kernel_settings(stream_);
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(copy_stream_);
  }

  std::string name() const override { return name_; }
  BackendCaps caps() const override {
    BackendCaps c;
    c.device_image_prep = true;
    return c;
  }

  void* alloc(size_t bytes) override { return arena_.alloc(bytes, stream_); }
  void release(void* p) override { arena_.release(p, stream_); }

  void upload(void* dst, const void* host_src, size_t bytes) override {
    // The copy must not overtake kernels already queued that may still read dst.
    CUDA_CHECK(cudaEventRecord(compute_mark_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, compute_mark_, 0));
    for (size_t done = 0; done < bytes;) {
      const size_t len = bytes - done < kStagingBytes ? bytes - done : kStagingBytes;
      const int b = next_staging_;
      next_staging_ = (next_staging_ + 1) % kStagingBuffers;
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

  // Ops on activations: one launcher per op for every storage type (cuda_ops.h). Convolutions, matmuls and
  // batch norm ask the vendor libraries first; each vendor call returns false when the library has no
  // algorithm for the problem (logged once per layer), and the custom kernel runs then.
  void convert(size_t n, DType from, const void* x, DType to, void* y) override {
    CUDA_CHECK(convert_cuda(n, from, x, to, y, stream_));
  }
  // Biased 16-bit convolutions and matmuls skip the vendor libraries: both want the bias in the output's type.
  void conv2d_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b, void* y) override {
    if (t == DType::kF32 || !b) VENDOR_FIRST(conv.forward(t, d, x, w, b, y));
    CUDA_CHECK(conv2d_forward_cuda(t, d, x, w, b, y, stream_));
  }
  void conv2d_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override {
    VENDOR_FIRST(conv.backward_data(t, d, dy, w, dx));
    CUDA_CHECK(conv2d_backward_data_cuda(t, d, dy, w, dx, stream_));
  }
  void conv2d_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                              float* db) override {
    if (VENDOR(conv.backward_filter(t, d, x, dy, dw))) {
      if (db) CUDA_CHECK(column_sum_cuda(t, d.n * d.p() * d.q(), d.k, dy, db, stream_));
      return;
    }
    CUDA_CHECK(conv2d_backward_filter_cuda(t, d, x, dy, dw, db, stream_));
  }
  void linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                      void* y) override {
    if (t == DType::kF32 || !b) VENDOR_FIRST(linear.forward(t, m, k, n, x, w, b, y));
    CUDA_CHECK(linear_forward_cuda(t, m, k, n, x, w, b, y, stream_));
  }
  void linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) override {
    VENDOR_FIRST(linear.backward_data(t, m, k, n, dy, w, dx));
    CUDA_CHECK(linear_backward_data_cuda(t, m, k, n, dy, w, dx, stream_));
  }
  void linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                              float* db) override {
    if (VENDOR(linear.backward_weight(t, m, k, n, x, dy, dw))) {
      if (db) CUDA_CHECK(column_sum_cuda(t, m, n, dy, db, stream_));
      return;
    }
    CUDA_CHECK(linear_backward_weight_cuda(t, m, k, n, x, dy, dw, db, stream_));
  }
  void relu_forward(DType t, size_t n, const void* x, void* y) override {
    CUDA_CHECK(relu_forward_cuda(t, n, x, y, stream_));
  }
  void relu_backward(DType t, size_t n, const void* y, const void* dy, void* dx) override {
    CUDA_CHECK(relu_backward_cuda(t, n, y, dy, dx, stream_));
  }
  void maxpool_forward(DType t, const PoolDesc& d, const void* x, bool relu, void* y, int32_t* argmax) override {
    CUDA_CHECK(maxpool_forward_cuda(t, d, x, relu, y, argmax, stream_));
  }
  void maxpool_backward(DType t, const PoolDesc& d, const void* dy, const void* relu_y, const int32_t* argmax,
                        void* dx) override {
    CUDA_CHECK(maxpool_backward_cuda(t, d, dy, relu_y, argmax, dx, stream_));
  }
  void avgpool_forward(DType t, const PoolDesc& d, const void* x, void* y) override {
    CUDA_CHECK(avgpool_forward_cuda(t, d, x, y, stream_));
  }
  void avgpool_backward(DType t, const PoolDesc& d, const void* dy, void* dx) override {
    CUDA_CHECK(avgpool_backward_cuda(t, d, dy, dx, stream_));
  }
  void softmax_xent(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps, float scale,
                    void* dlogits, double* host_loss_sum, int64_t* host_correct) override {
    CUDA_CHECK(cudaMemsetAsync(d_totals_, 0, sizeof(LossTotals), stream_));
    CUDA_CHECK(softmax_xent_cuda(t, n, classes, logits, labels, eps, scale, dlogits, &d_totals_->loss_sum,
                                 &d_totals_->correct, stream_));
    read_totals(host_loss_sum, host_correct);
  }
  void softmax_xent_totals(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps,
                           float scale, void* dlogits, LossTotals* totals) override {
    CUDA_CHECK(softmax_xent_cuda(t, n, classes, logits, labels, eps, scale, dlogits, &totals->loss_sum,
                                 &totals->correct, stream_));
  }
  // cuDNN serves the plain batch norm; the fused ReLU (with its bit mask) and residual join run on the custom
  // kernels.
  void batchnorm_forward_train(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, float eps, float momentum, BnAct act, void* y, uint32_t* relu_mask,
                               float* save_mean, float* save_invstd, float* running_mean,
                               float* running_var) override {
    if (vendor_bn_ && !act.relu && !residual)
      VENDOR_FIRST(bn.forward_train(t, rows, c, x, gamma, beta, eps, momentum, y, save_mean, save_invstd,
                                    running_mean, running_var));
    CUDA_CHECK(batchnorm_forward_train_cuda(t, rows, c, x, residual, gamma, beta, eps, momentum, act, y, relu_mask,
                                            save_mean, save_invstd, running_mean, running_var,
                                            workspace(batchnorm_work_bytes(c)), stream_));
  }
  void batchnorm_forward_infer(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                               const float* beta, const float* running_mean, const float* running_var, float eps,
                               BnAct act, void* y) override {
    if (vendor_bn_ && !act.relu && !residual)
      VENDOR_FIRST(bn.forward_infer(t, rows, c, x, gamma, beta, running_mean, running_var, eps, y));
    CUDA_CHECK(batchnorm_forward_infer_cuda(t, rows, c, x, residual, gamma, beta, running_mean, running_var, eps,
                                            act, y, workspace(batchnorm_work_bytes(c)), stream_));
  }
  void batchnorm_backward(DType t, int rows, int c, const void* x, const uint32_t* relu_mask, const void* dy,
                          const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                          void* dresidual, float* dgamma, float* dbeta) override {
    if (vendor_bn_ && !relu_mask && !dresidual)
      VENDOR_FIRST(bn.backward(t, rows, c, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta));
    CUDA_CHECK(batchnorm_backward_cuda(t, rows, c, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual,
                                       dgamma, dbeta, workspace(batchnorm_work_bytes(c)), stream_));
  }
  void dropout_forward(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key, const int64_t* ids,
                       void* y, uint8_t* mask) override {
    CUDA_CHECK(dropout_forward_cuda(t, n, per_sample, x, p, key, ids, y, mask, stream_));
  }
  void dropout_backward(DType t, size_t count, float p, const void* dy, const uint8_t* mask, void* dx) override {
    CUDA_CHECK(dropout_backward_cuda(t, count, p, dy, mask, dx, stream_));
  }
  void axpy(DType t, size_t n, float alpha, const void* x, void* y) override {
    CUDA_CHECK(axpy_cuda(t, n, alpha, x, y, stream_));
  }
  void shortcut_pad_forward(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                            void* y) override {
    CUDA_CHECK(shortcut_pad_forward_cuda(t, n, h, w, c, stride, k, x, y, stream_));
  }
  void shortcut_pad_backward_add(DType t, int n, int h, int w, int c, int stride, int k, const void* dy,
                                 void* dx) override {
    CUDA_CHECK(shortcut_pad_backward_add_cuda(t, n, h, w, c, stride, k, dy, dx, stream_));
  }

  // fp32 buffers: optimizer updates, gradient scaling and norms, synchronised batch norm.
  void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                  bool nesterov) override {
    CUDA_CHECK(sgd_update_cuda(n, w, g, v, lr, momentum, wd, nesterov, stream_, gate_));
  }
  void adamw_update(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                    float eps, float wd, float bc1, float bc2) override {
    CUDA_CHECK(adamw_update_cuda(n, w, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2, stream_, gate_));
  }
  void scale(size_t n, float alpha, float* x) override { CUDA_CHECK(scale_cuda(n, alpha, x, stream_)); }
  double sum_squares(size_t n, const float* x) override {
    CUDA_CHECK(cudaMemsetAsync(&d_totals_->loss_sum, 0, sizeof(double), stream_));
    CUDA_CHECK(sum_squares_cuda(n, x, &d_totals_->loss_sum, stream_));
    CUDA_CHECK(cudaMemcpyAsync(h_totals_, d_totals_, sizeof(LossTotals), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h_totals_->loss_sum;
  }
  void batchnorm_stats(int rows, int c, const float* x, double* stats) override {
    CUDA_CHECK(batchnorm_stats_cuda(rows, c, x, stats, stream_));
  }
  void batchnorm_forward_from_stats(int rows, int c, const float* x, const double* stats, const float* gamma,
                                    const float* beta, float eps, float momentum, float* y, float* save_mean,
                                    float* save_invstd, float* running_mean, float* running_var) override {
    CUDA_CHECK(batchnorm_forward_from_stats_cuda(rows, c, x, stats, gamma, beta, eps, momentum, y, save_mean,
                                                 save_invstd, running_mean, running_var,
                                                 workspace(batchnorm_work_bytes(c)), stream_));
  }
  void batchnorm_backward_sums(int rows, int c, const float* x, const float* dy, const float* save_mean,
                               const float* save_invstd, double* sums) override {
    CUDA_CHECK(batchnorm_backward_sums_cuda(rows, c, x, dy, save_mean, save_invstd, sums, stream_));
  }
  void batchnorm_backward_from_sums(int rows, int c, const float* x, const float* dy, const float* gamma,
                                    const float* save_mean, const float* save_invstd, const double* local_sums,
                                    const double* global_sums, float* dx, float* dgamma, float* dbeta) override {
    CUDA_CHECK(batchnorm_backward_from_sums_cuda(rows, c, x, dy, gamma, save_mean, save_invstd, local_sums,
                                                 global_sums, dx, dgamma, dbeta, workspace(batchnorm_work_bytes(c)),
                                                 stream_));
  }
  void mix_images(int n, int h, int w, int c, const MixDraw* draws, float* x) override {
    CNN_CHECK(n % 2 == 0, "mix_images: %d samples, an odd count leaves a sample without its partner", n);
    CUDA_CHECK(mix_images_cuda(n, h, w, c, draws, x, stream_));
  }
  void softmax_xent_mix_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                               const MixDraw* mix, float eps, float scale, void* dlogits, LossTotals* totals) override {
    CUDA_CHECK(softmax_xent_mix_cuda(t, n, classes, logits, labels, mix, eps, scale, dlogits, &totals->loss_sum,
                                     &totals->correct, stream_));
  }
  cudaStream_t stream() const { return stream_; }
  DeviceArena& arena() { return arena_; }

  void count_nonfinite(size_t n, const float* x, int64_t base, int64_t* d_stats) override {
    CUDA_CHECK(count_nonfinite_cuda(n, x, base, d_stats, stream_));
  }
  void set_update_gate(const int64_t* d_flag) override { gate_ = d_flag; }
  std::unique_ptr<PhaseTimer> make_phase_timer() override { return make_event_phase_timer(stream_); }
  MemoryUse memory_use() const override { return {arena_.bytes_in_use(), arena_.peak_bytes()}; }
  std::unique_ptr<HostMirror> make_host_mirror(const void* d_src, size_t bytes) override {
    return make_pinned_mirror(d_src, bytes, stream_);
  }

  void set_label(const char* layer) override {
#if !CNN_SIMT_EMULATED
    if (vendor_) vendor_->ctx.layer = layer ? layer : "";
#else
    (void)layer;
#endif
  }

  void upload_images(const ImageBatch& b, float* x, int32_t* labels, int64_t* ids) override {
    const InputLayout lay(b);
    InputSlot& slot = input_[next_input_];
    next_input_ ^= 1;
    if (lay.total > slot.bytes) {  // grows to the largest batch (training or evaluation), then stays
      CUDA_CHECK(cudaEventSynchronize(slot.copied));
      CUDA_CHECK(cudaEventSynchronize(slot.consumed));
      CUDA_CHECK(cudaFreeHost(slot.host));
      arena_.release(slot.dev);
      CUDA_CHECK(cudaMallocHost(&slot.host, lay.total));
      slot.dev = static_cast<char*>(arena_.alloc(lay.total));
      slot.bytes = lay.total;
    }
    CUDA_CHECK(cudaEventSynchronize(slot.copied));  // the previous copy out of this pinned buffer is done
    float* ss = reinterpret_cast<float*>(slot.host + lay.scale_shift);
    for (int ch = 0; ch < b.c; ++ch) {  // the reference's arithmetic (kernels/image_prep_cpu.cpp)
      ss[ch] = 1.0f / b.std[ch];
      ss[b.c + ch] = -b.mean[ch] / b.std[ch];
    }
    std::memcpy(slot.host + lay.labels, b.labels, sizeof(int32_t) * b.n);
    if (b.ids) std::memcpy(slot.host + lay.ids, b.ids, sizeof(int64_t) * b.n);
    if (b.aug) std::memcpy(slot.host + lay.aug, b.aug, sizeof(ImageAug) * b.n);
    std::memcpy(slot.host + lay.pixels, b.pixels, static_cast<size_t>(b.n) * b.h * b.w * b.c);
    // The copy waits only for the kernels that read this slot two batches ago, not for all queued work.
    CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, slot.consumed, 0));
    CUDA_CHECK(cudaMemcpyAsync(slot.dev, slot.host, lay.total, cudaMemcpyHostToDevice, copy_stream_));
    CUDA_CHECK(cudaEventRecord(slot.copied, copy_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, slot.copied, 0));
    bool contrast = false;
    for (int i = 0; b.aug && i < b.n; ++i) contrast = contrast || b.aug[i].contrast != 1.f;
    CUDA_CHECK(prepare_images_cuda(b.n, b.h, b.w, b.c, reinterpret_cast<const uint8_t*>(slot.dev + lay.pixels),
                                   b.aug ? reinterpret_cast<const ImageAug*>(slot.dev + lay.aug) : nullptr,
                                   contrast ? reinterpret_cast<float*>(slot.dev + lay.means) : nullptr,
                                   reinterpret_cast<const float*>(slot.dev + lay.scale_shift), x, stream_));
    CUDA_CHECK(cudaMemcpyAsync(labels, slot.dev + lay.labels, sizeof(int32_t) * b.n, cudaMemcpyDeviceToDevice,
                               stream_));
    if (ids && b.ids)
      CUDA_CHECK(cudaMemcpyAsync(ids, slot.dev + lay.ids, sizeof(int64_t) * b.n, cudaMemcpyDeviceToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(slot.consumed, stream_));
  }

  // Graph-network ops; a concatenation is one slice copy per input (any number of inputs, no pointer table).
  void activation_forward(DType t, const Activation& a, size_t n, const void* x, void* y) override {
    CUDA_CHECK(activation_forward_cuda(t, a, n, x, y, stream_));
  }
  void activation_backward(DType t, const Activation& a, size_t n, const void* x, const void* dy, void* dx,
                           bool accumulate) override {
    CUDA_CHECK(activation_backward_cuda(t, a, n, x, dy, dx, accumulate, stream_));
  }
  void add_forward(DType t, size_t n, const void* a, const void* b, void* y) override {
    CUDA_CHECK(add_forward_cuda(t, n, a, b, y, stream_));
  }
  void mul_forward(DType t, int n, int hw, int c, const void* x, const void* s, void* y) override {
    CUDA_CHECK(mul_forward_cuda(t, n, hw, c, x, s, y, stream_));
  }
  void mul_backward(DType t, int n, int hw, int c, const void* x, const void* s, const void* dy, void* dx, void* ds,
                    bool accumulate) override {
    CUDA_CHECK(mul_backward_cuda(t, n, hw, c, x, s, dy, dx, ds, accumulate, stream_));
  }
  void concat_forward(DType t, int rows, int k, const int* channels, const void* const* x, void* y) override {
    int width = 0;
    for (int i = 0; i < k; ++i) width += channels[i];
    for (int i = 0, offset = 0; i < k; offset += channels[i++])
      CUDA_CHECK(concat_copy_in_cuda(t, rows, channels[i], width, offset, x[i], y, stream_));
  }
  void concat_backward(DType t, int rows, int k, const int* channels, const void* dy, void* const* dx,
                       bool accumulate) override {
    int width = 0;
    for (int i = 0; i < k; ++i) width += channels[i];
    for (int i = 0, offset = 0; i < k; offset += channels[i++])
      if (dx[i]) CUDA_CHECK(concat_copy_out_cuda(t, rows, channels[i], width, offset, dy, dx[i], accumulate, stream_));
  }

 private:
  // Adds the loss sum and correct count softmax_xent accumulated on the device to the host totals.
  void read_totals(double* host_loss_sum, int64_t* host_correct) {
    CUDA_CHECK(cudaMemcpyAsync(h_totals_, d_totals_, sizeof(LossTotals), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    *host_loss_sum += h_totals_->loss_sum;
    *host_correct += static_cast<int64_t>(h_totals_->correct);
  }

  // Scratch for multi-kernel ops, grown on demand. Kernels run in stream order, so one buffer serves all.
  void* workspace(size_t bytes) {
    if (bytes > work_bytes_) {
      arena_.release(work_, stream_);
      work_ = arena_.alloc(bytes, stream_);
      work_bytes_ = bytes;
    }
    return work_;
  }

  std::string name_;
  DeviceArena arena_;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr, copy_done_ = nullptr, staging_free_[kStagingBuffers] = {};
  void* staging_[kStagingBuffers] = {};
  int next_staging_ = 0;
  LossTotals* h_totals_ = nullptr;  // pinned
  LossTotals* d_totals_ = nullptr;
  void* work_ = nullptr;
  size_t work_bytes_ = 0;
  InputSlot input_[2];
  int next_input_ = 0;
  bool vendor_bn_ = false;  // GpuOptions::vendor_batchnorm, with the vendor libraries in use
#if !CNN_SIMT_EMULATED
  std::unique_ptr<gpu::VendorLibs> vendor_;  // null: custom kernels only
#endif
  const int64_t* gate_ = nullptr;  // Backend::set_update_gate
};

}  // namespace

DeviceInfo device_info(int device) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char bus[32] = {0};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  return DeviceInfo{prop.name, bus, prop.totalGlobalMem / 1073741824.0};
}

DeviceContext device_context(Backend& be) {
  auto* cb = dynamic_cast<CudaBackend*>(&be);
  CNN_CHECK(cb, "backend '%s' is not the CUDA backend of this build", be.name().c_str());
  return {cb->stream(), &cb->arena()};
}

}  // namespace CNN_CUDA_NS

#if CNN_SIMT_EMULATED
std::unique_ptr<Backend> make_emu_backend(const GpuOptions& opts) {
  CUDA_CHECK(cudaSetDevice(0));  // binds its one device as make_cuda_backend does (strict device mode checks it)
  return std::make_unique<emu::CudaBackend>("emu", opts, false);
}
DeviceInfo emu_device_info() { return emu::device_info(0); }
#else
int cuda_device_count() {
  // First, and within seconds: a driver older than the runtime gets both versions and the ways out.
  const DriverVerdict driver = cuda_driver_verdict();
  if (!driver.ok) raise(kExitFailure, "--device cuda: no usable GPU: %s", driver.message.c_str());
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    raise(kExitFailure, "--device cuda: no usable GPU (cudaGetDeviceCount: %s: %s); check the NVIDIA driver and "
          "CUDA_VISIBLE_DEVICES, or use --device cpu (or emu, the SIMT emulator)", cudaGetErrorName(err),
          cudaGetErrorString(err));
  return count;
}

DeviceInfo cuda_device_info(int device) { return gpu::device_info(device); }

std::unique_ptr<Backend> make_cuda_backend(int device, const GpuOptions& opts) {
  const int count = cuda_device_count();
  if (count == 0)
    raise(kExitFailure, "--device cuda: no GPU visible to this process (check CUDA_VISIBLE_DEVICES and the job's GPU "
          "allocation), or use --device cpu");
  CUDA_CHECK(cudaSetDevice(device % count));
  return std::make_unique<gpu::CudaBackend>("cuda", opts, true);
}
#endif

}  // namespace cnn

#if !CNN_SIMT_EMULATED
extern "C" cnn::Backend* cnntrain_cuda_make_backend(int device, const cnn::GpuOptions* opts, std::string* error,
                                                    int* error_code) {
  try {
    return cnn::make_cuda_backend(device, *opts).release();
  } catch (const cnn::Error& e) {
    *error = e.what();
    *error_code = e.code();
  }
  return nullptr;
}

extern "C" int cnntrain_cuda_device_count(std::string* error, int* error_code) {
  try {
    return cnn::cuda_device_count();
  } catch (const cnn::Error& e) {
    *error = e.what();
    *error_code = e.code();
  }
  return -1;
}

extern "C" void cnntrain_cuda_device_info(int device, cnn::DeviceInfo* info) { *info = cnn::cuda_device_info(device); }
#endif
