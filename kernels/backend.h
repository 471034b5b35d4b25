// The compute interface. Every op the trainer runs goes through a Backend so the same layer code drives the
// CPU (kernels/*_cpu.cpp) and CUDA (kernels/cuda/*.cu, real GPU or the SIMT emulator) implementations.
// Layouts: activations NHWC (nChw16c only where a caller asks a backend that offers it: ActLayout), conv
// filters KRSC (out-ch, kh, kw, in-ch), linear weights [out, in].
// All pointers are device pointers of the backend (host memory for the CPU backend) unless named host_*.
// Parameter-gradient ops accumulate (+=) so gradient accumulation and shared buffers need no extra pass;
// input-gradient ops overwrite.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/dtype.h"
#include "src/base/error.h"

namespace cnn {

// Memory layout of an activation tensor. Everything is NHWC except where a backend offers oneDNN's blocked
// nChw16c ([n][c/16][h][w][16], c a multiple of 16; Backend::blocked_conv_ok) and a residual block keeps its
// inner tensors in it, so that the Winograd convolutions need no layout conversion (docs/perf.md).
enum class ActLayout : uint8_t { kNHWC, kNChw16c };

// x: [n,h,w,c], w: [k,r,s,c], y: [n,p,q,k]
struct ConvDesc {
  int n = 0, h = 0, w = 0, c = 0;
  int k = 0, r = 0, s = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  // Grouped convolution: input and output channels split into `groups` equal parts, output group g reads input
  // group g only; filters [k, r, s, c / groups] (KRSC with C = c / groups). groups == c == k: depthwise.
  int groups = 1;
  // Taps dilation_h rows / dilation_w columns apart: the window spans dilation * (r - 1) + 1 rows.
  int dilation_h = 1, dilation_w = 1;
  // extra_pad_h/w more zero rows/columns after the input than pad_h/w before it (ONNX pads
  // [pad_h, pad_w, pad_h + extra_pad_h, pad_w + extra_pad_w]), as PoolDesc.
  int extra_pad_h = 0, extra_pad_w = 0;
  // Layouts of x (and dx) and of y (and dy): NHWC everywhere unless Backend::blocked_conv_ok says otherwise.
  ActLayout x_layout = ActLayout::kNHWC, y_layout = ActLayout::kNHWC;
  int p() const { return (h + 2 * pad_h + extra_pad_h - dilation_h * (r - 1) - 1) / stride_h + 1; }
  int q() const { return (w + 2 * pad_w + extra_pad_w - dilation_w * (s - 1) - 1) / stride_w + 1; }
  // The convolution every backend had before groups, dilation and asymmetric padding.
  bool plain() const {
    return groups == 1 && dilation_h == 1 && dilation_w == 1 && extra_pad_h == 0 && extra_pad_w == 0;
  }
};

// x: [n,h,w,c], y: [n,p,q,c]; padded taps are ignored (max) or excluded from the count (avg, unless
// count_include_pad). `pad` rows/columns before and after the input, and extra_pad_h/w more after it (ONNX's
// asymmetric pads [pad, pad, pad + extra_pad_h, pad + extra_pad_w]).
struct PoolDesc {
  int n = 0, h = 0, w = 0, c = 0;
  int r = 2, s = 2, stride = 2, pad = 0;
  int extra_pad_h = 0, extra_pad_w = 0;
  // Average pooling divides by the window's taps inside the padded input (ONNX's count_include_pad, PyTorch's
  // default) instead of those inside the input.
  bool count_include_pad = false;
  int p() const { return (h + 2 * pad + extra_pad_h - r) / stride + 1; }
  int q() const { return (w + 2 * pad + extra_pad_w - s) / stride + 1; }
};

// --- The device input path (upload_images) ---
// Per-sample augmentation of one image as io/augment.h draws it from (seed, epoch, sample id); the draws
// stay on the host, the pixel work runs where the backend computes.
struct ImageAug {
  int32_t dy = 0, dx = 0;  // crop: output (y, x) reads input (y + dy, x' + dx); zero outside the image
  int32_t flip = 0;        // mirror first: x' = w - 1 - x
  int32_t erase_y = 0, erase_x = 0, erase_h = 0, erase_w = 0;  // set to 0 after normalisation; erase_h 0: none
  // Rotation about the image centre after crop and flip, bilinear, zero outside: the angle's cosine and sine,
  // computed once on the host so that every target interpolates at the same points (1, 0: none).
  float rot_cos = 1.f, rot_sin = 0.f;
  // Colour jitter after the rotation, in 0..255 units before normalisation, in this order (1: none).
  float brightness = 1.f, contrast = 1.f, saturation = 1.f;
};

// One batch of uint8 images on the host, NHWC, with what upload_images needs to turn it into the network's
// float input. Host pointers; aug and ids may be null.
struct ImageBatch {
  int n = 0, h = 0, w = 0, c = 0;
  const uint8_t* pixels = nullptr;  // [n, h, w, c]
  const ImageAug* aug = nullptr;    // [n]
  const float* mean = nullptr;      // [c], 0..255 units
  const float* std = nullptr;       // [c]
  const int32_t* labels = nullptr;  // [n]
  const int64_t* ids = nullptr;     // [n] global sample ids
};

// Splits the compute stream's timeline into phases for the step-time breakdown: mark(p) ends the running
// interval and starts one charged to phase p (p < 0: charged to nothing, e.g. the gap between steps). On the
// CPU backend a mark is the host clock at the call; on CUDA (and the emulator) an event recorded on the compute
// stream, so a phase is what the device spent on it, not when the host queued it, and marking never blocks.
class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void mark(int phase) = 0;
  // Adds the seconds of every finished interval to seconds[phase] (phase < nphases). wait = false takes only
  // the intervals the device has passed (never blocks); wait = true also waits for the rest.
  virtual void collect(double* seconds, int nphases, bool wait) = 0;
};

// Bytes held by a backend's live allocations now and at most since it was created.
struct MemoryUse {
  size_t in_use = 0, peak = 0;
};

// A host copy of a small device buffer, refreshed without blocking: per-step device results (non-finite
// counts) reach the host a step or two later instead of stalling the host every step.
class HostMirror {
 public:
  virtual ~HostMirror() = default;
  // Queues a copy of the device buffer behind all work queued so far on the compute stream.
  virtual void refresh() = 0;
  // The host copy once the last refresh() has landed, else null (never blocks).
  virtual const void* poll() = 0;
  // The host copy of the last refresh(), waiting for it.
  virtual const void* wait() = 0;
};

// Shape and layouts of a batch norm over activations [n, hw, c] (Backend::batchnorm_*_layout): x (and dx),
// y (and dy) and the residual (and its gradient) each in its own layout.
struct BnShape {
  int n = 0, hw = 0, c = 0;
  ActLayout x = ActLayout::kNHWC, y = ActLayout::kNHWC, residual = ActLayout::kNHWC;
  size_t rows() const { return static_cast<size_t>(n) * hw; }
};

// 32-bit words of a ReLU mask over n elements (Backend::batchnorm_forward_train).
inline size_t relu_mask_words(size_t n) { return (n + 31) / 32; }

// The activation that ends a fused batch norm (Backend::batchnorm_forward_*): none, ReLU (y = v > 0 ? v : 0),
// or ReLU capped at `cap` (y = min(relu(v), cap): ReLU6, torchvision's MobileNetV2, is cap 6). Converts
// implicitly from the bool `relu` of callers that know only ReLU.
struct BnAct {
  bool relu = false;
  bool capped = false;
  float cap = 0.f;  // when capped (> 0)
  BnAct(bool r = false) : relu(r) {}  // NOLINT: implicit on purpose
  static BnAct relu_capped(float c) {
    BnAct a(true);
    a.capped = true;
    a.cap = c;
    return a;
  }
};

// What a training step adds up on the device (see Backend::softmax_xent_totals); read with download().
struct LossTotals {
  double loss_sum;
  unsigned long long correct;
};

struct MixDraw;  // kernels/mix_images.h: how a training sample is mixed with its partner (mixup, cutmix)

// What distinguishes backends where callers choose a path (name() is for people: logs and test names).
struct BackendCaps {
  // upload_images does the pixel work (normalisation, augmentation) where the backend computes, so the loader
  // hands it uint8 pixels and augmentation draws. False: the loader thread prepares float images on the host
  // while the previous step runs (the CPU backend, whose pixel work would otherwise sit inside the step).
  bool device_image_prep = false;
};

// An element-wise activation of the graph-network ops (Backend::activation_forward; the math, with each
// backward's derivative, in kernels/activation.h). alpha, beta: LeakyRelu's slope (alpha); Clip's bounds
// (alpha = min, beta = max; ReLU6 is 0, 6); HardSigmoid's max(0, min(1, alpha*x + beta)); unused otherwise.
enum class ActKind : int32_t { kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kHardSwish, kSilu };
struct Activation {
  ActKind kind = ActKind::kSigmoid;
  float alpha = 0.f, beta = 0.f;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual BackendCaps caps() const = 0;

  // Device memory. alloc() never returns null (it fails the job with the size asked for).
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(float* x, size_t n, float value) = 0;
  virtual void synchronize() = 0;

  // Parameter version, an optimisation hint. While it is nonzero the caller guarantees that every parameter
  // buffer (conv filters, linear weights) passed to an op holds the values it held at earlier calls under the
  // same version, so the backend may reuse data it derived from them (the CPU backend's filters in oneDNN's
  // layouts: re-laid out once per optimizer step instead of once per call). Parameters that change must come
  // with a version never used before; 0, the initial value, promises nothing. Net sets it around its forward
  // and backward passes (Net::param_version).
  virtual void set_param_version(uint64_t version) {}

  // --- Ops on activations. `t` is the storage type of every void* tensor of the op (activations, activation
  // gradients, logits, the weights convolution and linear layers read: the fp32 parameter itself, or its
  // 16-bit copy); float* tensors are fp32 whatever t is (biases, parameter gradients, batch-norm parameters
  // and statistics). For bf16 and fp16 (docs/mixed_precision.md) an op computes what it computes in fp32 on
  // the widened inputs, in fp32, and rounds every 16-bit output once (to nearest even); parameter gradients
  // accumulate in fp32 straight from the 16-bit operands. ---

  // y = x converted from `from` to `to`: fp32 <-> bf16/fp16, or a copy for equal types; no overlap.
  virtual void convert(size_t n, DType from, const void* x, DType to, void* y) = 0;

  // Convolution (cross-correlation), optional bias b: [k].
  virtual void conv2d_forward(DType t, const ConvDesc& d, const void* x, const void* w, const float* b,
                              void* y) = 0;
  virtual void conv2d_backward_data(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) = 0;
  // dw += dL/dw, db += dL/db (db may be null).
  virtual void conv2d_backward_filter(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                                      float* db) = 0;
  // Both backward passes of one convolution, as conv2d_backward_filter and then (dx not null: not the first
  // layer) conv2d_backward_data, with their results. A backend that shares work between the two overrides it
  // (the fast CPU backend converts dy to oneDNN's blocked layout once for its Winograd kernels).
  virtual void conv2d_backward(DType t, const ConvDesc& d, const void* x, const void* dy, const void* w, float* dw,
                               float* db, void* dx) {
    conv2d_backward_filter(t, d, x, dy, dw, db);
    if (dx) conv2d_backward_data(t, d, dy, w, dx);
  }
  // Whether conv2d_backward_data_add takes `d` (n included): where the backend's input-gradient kernel for it can
  // add into dx (the fast CPU backend's Winograd kernels). A residual block asks for its main path's first
  // convolution, whose input gradient meets the identity shortcut's (src/model/blocks.cpp).
  virtual bool conv2d_backward_data_adds(DType t, const ConvDesc& d) { return false; }
  // dx += the input gradient of conv2d_backward_data, with the same bits as computing it and adding it afterwards
  // (axpy); only where conv2d_backward_data_adds.
  virtual void conv2d_backward_data_add(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
    raise(kExitFailure, "internal: conv2d_backward_data_add on a backend whose kernels cannot add "
          "(ask conv2d_backward_data_adds)");
  }

  // Whether conv2d_forward and the backward passes take x and y of this convolution (n included) in nChw16c
  // (d.x_layout, d.y_layout; the shape is read from d, its layouts ignored). No backend but the fast CPU one
  // does: its Winograd convolutions, which work in that layout (docs/perf.md).
  virtual bool blocked_conv_ok(DType t, const ConvDesc& d) { return false; }

  // Fully connected: x: [m,k], w: [n,k], b: [n] (nullable), y: [m,n] = x w^T + b.
  virtual void linear_forward(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                              void* y) = 0;
  virtual void linear_backward_data(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) = 0;
  // dw += dy^T x, db += column sums of dy (db may be null).
  virtual void linear_backward_weight(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                                      float* db) = 0;

  // y = max(x, 0); dx = dy where y > 0 (y is the forward output; x and y may alias).
  virtual void relu_forward(DType t, size_t n, const void* x, void* y) = 0;
  virtual void relu_backward(DType t, size_t n, const void* y, const void* dy, void* dx) = 0;

  // Max pooling; argmax: [n,p,q,c] flat input offsets of the winners, used by the backward pass. With `relu`
  // the op pools a ReLU's output: y = max(maxpool(x), 0), the ReLU applied to the (stride^2 times fewer)
  // pooled values (it commutes with the max), and the backward counts dy only where y > 0.
  virtual void maxpool_forward(DType t, const PoolDesc& d, const void* x, bool relu, void* y,
                               int32_t* argmax) = 0;
  // relu_y: the forward's y when it ran with `relu`, else null.
  virtual void maxpool_backward(DType t, const PoolDesc& d, const void* dy, const void* relu_y,
                                const int32_t* argmax, void* dx) = 0;

  // Softmax cross-entropy over logits [n, classes] with int32 labels [n] and label smoothing eps (the
  // target puts 1-eps+eps/classes on the label and eps/classes elsewhere). Adds the sum of the n losses to
  // *host_loss_sum and the number of rows whose arg-max equals the label to *host_correct (fp32 arithmetic,
  // double sums, whatever t is). When dlogits is not null it receives scale * d(sum of losses)/d(logits);
  // scale = 1/global_batch gives the gradient of the mean over the global batch.
  virtual void softmax_xent(DType t, int n, int classes, const void* logits, const int32_t* labels,
                            float label_smoothing, float scale, void* dlogits, double* host_loss_sum,
                            int64_t* host_correct) = 0;

  // SGD with momentum and L2 weight decay (PyTorch convention): g' = g + wd*w; v = momentum*v + g';
  // w -= lr * (nesterov ? g' + momentum*v : v).
  virtual void sgd_update(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                          bool nesterov) = 0;

  // --- Normalisation, regularisation, pooling, residual joins, AdamW (kernels/batchnorm.h, dropout.h,
  // pooling.h, elementwise.h, optimizer.h) ---

  // Batch normalisation over the channel dim of x: [rows, c] (rows = n*h*w, NHWC), optionally fused with what follows
  // it: y = act(bn(x) + residual), residual: [rows, c] or null (the join of a residual block), act = `act` (BnAct: the
  // identity, ReLU, or ReLU capped). Training uses the batch statistics (biased variance), saves mean/invstd [c] for
  // backward and updates the running statistics: r = (1-momentum) r + momentum * batch (unbiased variance); with a ReLU
  // it also writes relu_mask (relu_mask_words(rows*c) words; bit i % 32 of word i / 32 set when the activation passes
  // the gradient at i: v > 0, and v < cap when capped, v the value before the activation), its state for backward (1
  // bit per element instead of re-reading y). Inference uses the running statistics. In 16 bits the join is added in
  // fp32 before the one rounding of y, and relu_mask is taken from the fp32 value (bit set when it is > 0, so also when
  // it rounds to a positive 16-bit y; when capped, clear when it is >= cap).
  virtual void batchnorm_forward_train(DType t, int rows, int c, const void* x, const void* residual,
                                       const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                       void* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                       float* running_mean, float* running_var) = 0;
  virtual void batchnorm_forward_infer(DType t, int rows, int c, const void* x, const void* residual,
                                       const float* gamma, const float* beta, const float* running_mean,
                                       const float* running_var, float eps, BnAct act, void* y) = 0;
  // Backward of batchnorm_forward_train. relu_mask: its mask when it ran with `relu`, else null. g = dy
  // masked by the ReLU: dgamma += sum(g * xhat), dbeta += sum(g); dx overwritten with the gradient of x (may
  // be null); dresidual overwritten with g, the gradient of the residual input (may be null).
  virtual void batchnorm_backward(DType t, int rows, int c, const void* x, const uint32_t* relu_mask,
                                  const void* dy, const float* gamma, const float* save_mean,
                                  const float* save_invstd, void* dx, void* dresidual, float* dgamma,
                                  float* dbeta) = 0;
  // The same three with each operand in its own layout (BnShape: x and dx, y and dy, residual and dresidual),
  // rows = s.n * s.hw; the ReLU mask has the same size, bit k for the element at index k of nChw16c when any
  // operand is nChw16c (of NHWC otherwise, as above). nChw16c operands only
  // where blocked_batchnorm_ok(t) (the fast CPU backend, fp32); elsewhere all three NHWC (the ops above) or fail.
  virtual bool blocked_batchnorm_ok(DType t) { return false; }
  virtual void batchnorm_forward_train_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                              const float* gamma, const float* beta, float eps, float momentum,
                                              BnAct act, void* y, uint32_t* relu_mask, float* save_mean,
                                              float* save_invstd, float* running_mean, float* running_var) {
    batchnorm_forward_train(t, nhwc_rows(s), s.c, x, residual, gamma, beta, eps, momentum, act, y, relu_mask,
                            save_mean, save_invstd, running_mean, running_var);
  }
  virtual void batchnorm_forward_infer_layout(DType t, const BnShape& s, const void* x, const void* residual,
                                              const float* gamma, const float* beta, const float* running_mean,
                                              const float* running_var, float eps, BnAct act, void* y) {
    batchnorm_forward_infer(t, nhwc_rows(s), s.c, x, residual, gamma, beta, running_mean, running_var, eps, act, y);
  }
  virtual void batchnorm_backward_layout(DType t, const BnShape& s, const void* x, const uint32_t* relu_mask,
                                         const void* dy, const float* gamma, const float* save_mean,
                                         const float* save_invstd, void* dx, void* dresidual, float* dgamma,
                                         float* dbeta) {
    batchnorm_backward(t, nhwc_rows(s), s.c, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual,
                       dgamma, dbeta);
  }

  // Inverted dropout over x: [n, per_sample]; the keep bit of element j of a sample is a function of
  // (key, ids[sample], j) only (ids: device [n] global sample ids). mask: [n, per_sample] bytes.
  virtual void dropout_forward(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key,
                               const int64_t* ids, void* y, uint8_t* mask) = 0;
  virtual void dropout_backward(DType t, size_t count, float p, const void* dy, const uint8_t* mask,
                                void* dx) = 0;

  // Average pooling (padding excluded from the count unless d.count_include_pad); global average pooling (and
  // ONNX's ReduceMean over H, W) is the window r=h, s=w.
  virtual void avgpool_forward(DType t, const PoolDesc& d, const void* x, void* y) = 0;
  virtual void avgpool_backward(DType t, const PoolDesc& d, const void* dy, void* dx) = 0;

  // y += alpha x (activations of type t); x *= alpha and the sum of squares (synchronizes; host result) on
  // fp32 buffers (gradients).
  virtual void axpy(DType t, size_t n, float alpha, const void* x, void* y) = 0;
  virtual void scale(size_t n, float alpha, float* x) = 0;
  virtual double sum_squares(size_t n, const float* x) = 0;
  // Parameter-free shortcut (He et al. option A): subsample x [n,h,w,c] by `stride` and zero-pad the
  // channels to k: y [n, ceil(h/stride), ceil(w/stride), k]. Backward adds the shortcut's gradient into dx (the
  // residual block's, which the main path wrote): only the sampled pixels change, dx += dy's first c channels.
  virtual void shortcut_pad_forward(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                                    void* y) = 0;
  virtual void shortcut_pad_backward_add(DType t, int n, int h, int w, int c, int stride, int k, const void* dy,
                                         void* dx) = 0;

  // AdamW (decoupled weight decay): w -= lr*wd*w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // w -= lr * (m/bc1) / (sqrt(v/bc2) + eps), bc1 = 1-b1^t and bc2 = 1-b2^t for step t >= 1.
  virtual void adamw_update(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1,
                            float beta2, float eps, float wd, float bc1, float bc2) = 0;

  // --- Vendor-library dispatch and the device input path (kernels/image_prep.h) ---

  // Names the layer whose ops follow, for the CUDA backend's one log line when an op falls back from
  // cuDNN/cuBLASLt to the custom kernel. The pointer must stay valid until the next call; no effect elsewhere.
  virtual void set_label(const char* layer) { (void)layer; }

  // x [n, h, w, c] = (augment(pixels) - mean) / std, then the erase rectangle set to 0; labels and ids (may
  // be null) copied to device memory. Ordered after the work already queued, but the transfer of the uint8
  // bytes does not wait for that work: on a GPU it overlaps the previous step. The host buffers may be
  // reused as soon as the call returns.
  virtual void upload_images(const ImageBatch& b, float* x, int32_t* labels, int64_t* ids) = 0;

  // --- Non-finite checks and observability (src/train/nonfinite.h, src/obs/; kernels/nonfinite.h) ---

  // Adds to d_stats[0] the number of NaN and +-inf values in x[0, n) and raises d_stats[1] to base + i + 1
  // for the largest index i of one (unchanged when there is none, so 0 means "none"). d_stats: two device
  // int64 values, so ranges of one larger buffer (base = the range's offset in it) accumulate into one count
  // and the position of the last bad value. The result stays on the device (read it with a HostMirror).
  virtual void count_nonfinite(size_t n, const float* x, int64_t base, int64_t* d_stats) = 0;
  // Gates optimizer updates on a device flag: while a gate is set, sgd_update and adamw_update (and every
  // update op added later) change nothing when *d_flag != 0 at the time they run, so a step is skipped
  // without the host reading the flag. nullptr removes the gate.
  virtual void set_update_gate(const int64_t* d_flag) = 0;
  virtual std::unique_ptr<PhaseTimer> make_phase_timer() = 0;
  // Memory of this backend's alloc() calls: host memory on the CPU backend, device memory (the arena's
  // blocks in use) on CUDA.
  virtual MemoryUse memory_use() const = 0;
  // d_src must stay allocated while the mirror exists; bytes is small (a few counters).
  virtual std::unique_ptr<HostMirror> make_host_mirror(const void* d_src, size_t bytes) = 0;

  // --- Data-parallel steps without host synchronisation (kernels/loss.h, kernels/batchnorm_sync.h): a step
  // leaves its loss sums on the device, and synchronised batch norm splits its per-channel sums out of the
  // forward and backward passes so that they can be added up across ranks in between. None synchronises. ---

  // softmax_xent, except that the loss sum and correct count are added to *totals (backend memory).
  virtual void softmax_xent_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                                   float label_smoothing, float scale, void* dlogits, LossTotals* totals) = 0;
  // stats (double, backend memory) = [sum of x per channel (c values), sum of x^2 per channel (c), rows].
  virtual void batchnorm_stats(int rows, int c, const float* x, double* stats) = 0;
  // batchnorm_forward_train with the batch statistics of `stats` (the sums above over stats[2c] rows, e.g.
  // added up over every rank): mean = sum/count, biased variance = max(sum_sq/count - mean^2, 0), running
  // variance updated with the unbiased count/(count-1) form.
  virtual void batchnorm_forward_from_stats(int rows, int c, const float* x, const double* stats,
                                            const float* gamma, const float* beta, float eps, float momentum,
                                            float* y, float* save_mean, float* save_invstd, float* running_mean,
                                            float* running_var) = 0;
  // sums (double, backend memory) = [sum dy per channel, sum dy*xhat per channel, rows].
  virtual void batchnorm_backward_sums(int rows, int c, const float* x, const float* dy, const float* save_mean,
                                       const float* save_invstd, double* sums) = 0;
  // dgamma += local[c..2c), dbeta += local[0..c) (this rank's share of the parameter gradient); dx (may be
  // null) = gamma*invstd*(dy - g[j]/g[2c] - xhat*g[c+j]/g[2c]) with the global sums g.
  virtual void batchnorm_backward_from_sums(int rows, int c, const float* x, const float* dy, const float* gamma,
                                            const float* save_mean, const float* save_invstd,
                                            const double* local_sums, const double* global_sums, float* dx,
                                            float* dgamma, float* dbeta) = 0;

  // --- Mixup and cutmix (kernels/mix_images.h, kernels/loss.h; io/mix.h draws them) ---

  // Mixes the prepared batch x [n, h, w, c] (fp32, n even) in place: sample i with its partner i ^ 1 as
  // draws[i] (backend memory, [n]) says.
  virtual void mix_images(int n, int h, int w, int c, const MixDraw* draws, float* x) = 0;
  // softmax_xent_totals with the soft target of a mixed batch: row i's target is lam * (smoothed one-hot of
  // labels[i]) + (1 - lam) * (that of mix[i].partner_label), lam = mix[i].lam (mix: backend memory, [n]); the
  // correct count compares the arg-max with labels[i].
  virtual void softmax_xent_mix_totals(DType t, int n, int classes, const void* logits, const int32_t* labels,
                                       const MixDraw* mix, float label_smoothing, float scale, void* dlogits,
                                       LossTotals* totals) = 0;

  // --- Graph-network ops (the ONNX operators of imported networks: kernels/activation.h, kernels/join.h).
  // Input gradients of these ops take `accumulate`: false overwrites dx, true adds to it (dx = dx + g, one
  // rounding in 16 bits), so a tensor that several nodes read sums its consumers' gradients in place. Add has
  // no backward of its own: each input's gradient is dy, a copy() (or axpy(t, n, 1, dy, dx) to accumulate). ---

  // y = f(x), the activation a (kernels/activation.h); x and y may alias.
  virtual void activation_forward(DType t, const Activation& a, size_t n, const void* x, void* y) = 0;
  // dx (+)= dy * f'(x). Every kind takes the forward's input x (not y), so a forward whose input a backward
  // needs must not run in place.
  virtual void activation_backward(DType t, const Activation& a, size_t n, const void* x, const void* dy, void* dx,
                                   bool accumulate) = 0;
  // y = a + b over n elements; y may alias a or b.
  virtual void add_forward(DType t, size_t n, const void* a, const void* b, void* y) = 0;
  // y[i,j,k] = x[i,j,k] * s[i,k] with x, y: [n, hw, c], s: [n, c]: the squeeze-excitation scaling of an NHWC
  // map [n, h, w, c] by [n, 1, 1, c] (hw = h*w), and the same-shape product of [rows, c] tensors when hw = 1.
  // y may alias x.
  virtual void mul_forward(DType t, int n, int hw, int c, const void* x, const void* s, void* y) = 0;
  // dx (+)= dy * s and ds (+)= sum over j of dy * x (a sum over h, w when hw > 1); dx, ds nullable.
  virtual void mul_backward(DType t, int n, int hw, int c, const void* x, const void* s, const void* dy, void* dx,
                            void* ds, bool accumulate) = 0;
  // Concatenation along channels of k tensors x[i]: [rows, channels[i]] into y: [rows, sum of channels] (rows =
  // n*h*w; NHWC, so each pixel's channels interleave). channels and x are host arrays (x of device pointers).
  virtual void concat_forward(DType t, int rows, int k, const int* channels, const void* const* x, void* y) = 0;
  // The split: dx[i] (+)= dy's channels of input i; null entries of dx are skipped.
  virtual void concat_backward(DType t, int rows, int k, const int* channels, const void* dy, void* const* dx,
                               bool accumulate) = 0;

 private:
  // The rows of an all-NHWC BnShape; fails for nChw16c operands (a backend without blocked_batchnorm_ok).
  int nhwc_rows(const BnShape& s) const {
    if (s.x != ActLayout::kNHWC || s.y != ActLayout::kNHWC || s.residual != ActLayout::kNHWC)
      raise(kExitFailure, "backend %s has no batch norm over nChw16c activations (blocked_batchnorm_ok is false)",
            name().c_str());
    return static_cast<int>(s.rows());
  }
};

// The CPU backend; `threads` bounds the threads its kernels use.
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace cnn
