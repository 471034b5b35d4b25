// The backend sweep (in the manner of ggml's test-backend-ops): every op of the Backend interface
// (kernels/backend.h) runs on every available backend over ragged shapes, and each output is compared with
// the same case run on the reference kernels (CpuKernels::kReference, the oracle) under one rule,
// |got - ref| <= atol + rtol * |ref|, printing the first mismatches. Where the fast CPU backend runs the
// reference kernel itself (the loss, synchronised batch norm, image preparation, 16-bit conversion), that
// oracle would compare the CPU targets with their own code: those cases carry an independent oracle instead
// (Case::oracle, tests/backend/oracles.h), and every target, the CPU ones included, is compared with it.
//
// The sweep reads the Backend class out of kernels/backend.h (embedded into the binary at build time) and
// fails when a virtual op has no case of its own, or when a case names an op the header lacks. So a new op is
// not done until it has a case here.
//
// ADDING A CASE FOR A NEW OP
//   1. In the tests/backend/cases_*.cpp file of its family (or a new cases_<family>.cpp: the Makefile picks it
//      up), register it with CNN_SWEEP_CASES:
//
//        CNN_SWEEP_CASES(my_family) {
//          for (int n : {1, 37, 70001}) {                      // ragged sizes: tails of blocks, warps, vectors
//            add_case({"my_op", "n=" + std::to_string(n), {}, [n](Run& r) {
//              const float* d_x = r.upload(random_vec(n, 1));  // explicit seeds: same inputs on every backend
//              float* d_y = r.garbage(n);                      // NaN-filled: an output must be written
//              r.be.my_op(DType::kF32, n, d_x, d_y);           // bf16/fp16 cases: cases_half.cpp
//              r.output("y", d_y, n, kDefault);                // downloaded, compared with the oracle's
//            }});
//          }
//        }
//
//   2. Inputs come from explicit seeds (random_vec, in [-1, 1] unless the op needs otherwise), so every
//      backend sees the same data. Upload through r.upload()/r.zeros()/r.garbage(); the run frees them.
//   3. Record every result with r.output(name, device_ptr, count, tolerance): exact (kExact) for ops that only
//      move or select values (relu, pooling's max, masks, copies), kDefault for arithmetic, or a documented
//      looser Tol for long reductions. Results that come back on the host (a loss sum) go through
//      r.output_host(). Accumulating outputs (+=) start from random values so the accumulation is checked.
//   4. A case covers its op only: `also` names further ops it calls whose results it checks (e.g. the backward
//      of a forward op run in the same case), for the reader; each of those needs a case of its own.
//   5. If the fast CPU backend runs the op's reference kernel (kernels/cpu/cpu_backend.cpp calls its *_cpu
//      function), add the op to kSelfReferenced in sweep_test.cpp and give each case an `oracle`: the same
//      outputs, same names and order, computed from the op's definition (tests/backend/oracles.h).
//   6. Build and run: make test-backends, or build/tests/backend_tests --gtest_filter='*my_op*'.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/common/test_util.h"

namespace cnn::sweep {

// |got - ref| <= atol + rtol * |ref|, element by element.
struct Tol {
  double atol, rtol;
};
constexpr Tol kExact{0, 0};
constexpr Tol kDefault{1e-5, 1e-4};

// Whether a CPU backend may run `d` on Winograd F(4x4, 3x3): 3x3 stride-1 "same" convolutions with 32 or more
// channels in and out (oneDNN's kernels on AVX-512, cnntrain's own below it for 32 and 64). Their transforms
// round at up to ~3e-5 of the sums' scale (tests/unit/test_winograd16.cpp measures the kernels against double
// sums): 2.3e-4 at 64 channels of values in [-1, 1], where direct kernels stay within 1e-4. Callers widen the
// absolute tolerance of y and dx to kWinogradAtol for these shapes only.
inline bool winograd_shape(const ConvDesc& d) {
  return d.plain() && d.r == 3 && d.s == 3 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 1 &&
         d.pad_w == 1 && d.c >= 32 && d.k >= 32 && d.c % 16 == 0 && d.k % 16 == 0;
}
constexpr double kWinogradAtol = 4e-4;

// One output of one run, on the host, as doubles (integers and bytes convert exactly).
struct Output {
  std::string name;
  std::vector<double> values;
  Tol tol;
};

// One run of a case on one backend: device buffers it allocates are released when the run ends.
class Run {
 public:
  explicit Run(Backend& be) : be(be) {}
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  template <class T>
  T* upload(const std::vector<T>& host) {
    T* d = static_cast<T*>(hold(be.alloc(sizeof(T) * (host.empty() ? 1 : host.size()))));
    be.upload(d, host.data(), sizeof(T) * host.size());
    return d;
  }
  float* zeros(size_t n) { return upload(std::vector<float>(n, 0.f)); }
  // Filled with NaN, so an output the op fails to write shows up as a mismatch.
  float* garbage(size_t n);
  template <class T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> host(n);
    be.download(host.data(), d, sizeof(T) * n);
    return host;
  }

  void output(const std::string& name, const float* d, size_t n, Tol tol);
  void output(const std::string& name, const int32_t* d, size_t n);  // exact
  void output(const std::string& name, const uint8_t* d, size_t n);  // exact
  // n values of the 16-bit type t (bf16/fp16: backend.h, "Ops on activations"), compared widened.
  void output(const std::string& name, DType t, const void* d, size_t n, Tol tol);
  void output_host(const std::string& name, std::vector<double> values, Tol tol);

  Backend& be;
  std::vector<Output> outputs;

 private:
  void* hold(void* p) {
    held_.push_back(p);
    return p;
  }
  std::vector<void*> held_;
};

struct Case {
  Case(std::string op, std::string shape, std::vector<std::string> also, std::function<void(Run&)> body,
       std::function<void(Run&)> oracle = nullptr)
      : op(std::move(op)), shape(std::move(shape)), also(std::move(also)), body(std::move(body)),
        oracle(std::move(oracle)) {}
  std::string op;                 // the Backend op under test, as named in kernels/backend.h
  std::string shape;              // what distinguishes this case (printed with mismatches)
  std::vector<std::string> also;  // further ops whose results the case checks (not counted as their cases)
  std::function<void(Run&)> body;
  // When set, the expected outputs: run instead of the body on the reference backend, it records the body's
  // outputs (same names, same order) computed independently of the kernels (tests/backend/oracles.h).
  std::function<void(Run&)> oracle;
};

void add_case(Case c);
const std::vector<Case>& all_cases();

// Virtual member functions of class Backend in kernels/backend.h, in declaration order (the header's text
// is compiled into the binary, so the sweep also runs where the sources are not, e.g. a GPU bundle).
std::vector<std::string> backend_ops();
// The parser behind backend_ops(), exposed for its own test.
std::vector<std::string> parse_virtual_methods(const std::string& header, const std::string& class_name);

using test::random_vec;

// The ReLU mask bits (Backend::batchnorm_forward_train) of the first n elements as 0/1 (the padding bits of
// the last word are unspecified).
std::vector<double> mask_bits(Run& r, const uint32_t* d_mask, size_t n);

// Batch-norm input, rows x c: channel j's values are offset by 5j, large means that expose cancellation in
// one-pass variance formulas.
std::vector<float> bn_input(int rows, int c, uint64_t seed);

// The absolute tolerance of batch norm's training output y for input x (rows x c, NHWC), gamma and beta: at least
// floor, and at least fp32's rounding reach where y is computed as x * scale + shift (scale = gamma * invstd,
// cuDNN's form): |scale| * max|x| + |shift| times 2^-23 per channel. A channel whose rows nearly agree has a large
// invstd, and scale * x then spends most of fp32's bits on the channel offset (two rows 1e-3 apart at 190:
// scale * x ~ 4e4, whose rounding alone is ~2e-3).
double bn_y_atol(int rows, int c, const std::vector<float>& x, const std::vector<float>& gamma,
                 const std::vector<float>& beta, float eps, double floor);

// The epilogues batch norm fuses: none, ReLU, residual add + ReLU (a block's join), residual add alone, and a
// capped ReLU (ReLU6's kind; cap 0.5, inside the range of the cases' outputs, so that both bounds clip).
struct BnEpilogue {
  bool residual, relu;
  float cap = 0.f;  // > 0: the ReLU is capped there
  BnAct act() const { return cap > 0.f ? BnAct::relu_capped(cap) : BnAct(relu); }
  std::string name() const {
    return std::string(residual ? " +residual" : "") + (cap > 0.f ? " +relu capped" : relu ? " +relu" : "");
  }
};
constexpr BnEpilogue kBnEpilogues[] = {{false, false}, {false, true}, {true, true}, {true, false}, {false, true, 0.5f}};

}  // namespace cnn::sweep

#define CNN_SWEEP_CASES(family)                                                       \
  static void cnn_sweep_cases_##family();                                             \
  static const bool cnn_sweep_registered_##family = (cnn_sweep_cases_##family(), true); \
  static void cnn_sweep_cases_##family()
