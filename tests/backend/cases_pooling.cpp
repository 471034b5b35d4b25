// Sweep cases: max and average pooling (overlapping and padded windows, the 2x2 fast path, global pooling).
#include "kernels/pooling.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

PoolDesc pool(int n, int h, int w, int c, int k, int stride, int pad) {
  PoolDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.r = d.s = k, d.stride = stride, d.pad = pad;
  return d;
}

std::string describe(const PoolDesc& d) {
  return "n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) + " c" +
         std::to_string(d.c) + " window " + std::to_string(d.r) + " stride " + std::to_string(d.stride) + " pad " +
         std::to_string(d.pad);
}

size_t in_size(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.c; }

const PoolDesc kPoolCases[] = {
    pool(3, 7, 9, 5, 2, 2, 0),    // 2x2 without padding, odd sizes (the fast CPU path)
    pool(2, 28, 28, 16, 2, 2, 0), // fmnist_cnn pool1
    pool(2, 9, 8, 33, 3, 2, 1),   // overlapping 3x3 stride 2 pad 1 (ResNet stem)
    pool(2, 5, 6, 3, 3, 1, 1),    // stride 1
    pool(3, 5, 6, 7, 5, 1, 0),    // window as large as the input
    pool(2, 8, 8, 40, 8, 1, 0),   // global pooling of an 8x8 map
    pool(2, 8, 8, 64, 8, 8, 0),
};

}  // namespace

CNN_SWEEP_CASES(pooling) {
  uint64_t seed = 400;
  for (const PoolDesc& d : kPoolCases) {
    const uint64_t s = seed += 10;
    // Max pooling compares values in the same order everywhere: results and winners are exact.
    for (bool relu : {false, true}) {  // relu: the pooling of a ReLU's output, fused
      const std::string shape = describe(d) + (relu ? " relu" : "");
      add_case({"maxpool_forward", shape, {}, [d, s, relu](Run& r) {
        float* d_y = r.garbage(out_size(d));
        int32_t* d_arg = r.upload(std::vector<int32_t>(out_size(d), -7));
        r.be.maxpool_forward(DType::kF32, d, r.upload(random_vec(in_size(d), s)), relu, d_y, d_arg);
        r.output("y", d_y, out_size(d), kExact);
        r.output("argmax", d_arg, out_size(d));
      }});
      add_case({"maxpool_backward", shape, {}, [d, s, relu](Run& r) {
        // Winners (and the ReLU's output) from the reference forward pass, so the backward pass is tested on
        // its own.
        std::vector<float> x = random_vec(in_size(d), s), y(out_size(d));
        std::vector<int32_t> arg(out_size(d));
        maxpool_forward_cpu(d, x.data(), relu, y.data(), arg.data());
        float* d_dx = r.garbage(in_size(d));  // overwritten
        r.be.maxpool_backward(DType::kF32, d, r.upload(random_vec(out_size(d), s + 1)), relu ? r.upload(y) : nullptr,
                              r.upload(arg), d_dx);
        // Overlapping windows add several dy into one tap; the order of those few additions may differ.
        r.output("dx", d_dx, in_size(d), kDefault);
      }});
    }
    add_case({"avgpool_forward", describe(d), {}, [d, s](Run& r) {
      float* d_y = r.garbage(out_size(d));
      r.be.avgpool_forward(DType::kF32, d, r.upload(random_vec(in_size(d), s + 2)), d_y);
      r.output("y", d_y, out_size(d), kDefault);
    }});
    add_case({"avgpool_backward", describe(d), {}, [d, s](Run& r) {
      float* d_dx = r.garbage(in_size(d));
      r.be.avgpool_backward(DType::kF32, d, r.upload(random_vec(out_size(d), s + 3)), d_dx);
      r.output("dx", d_dx, in_size(d), kDefault);
    }});
  }
}

}  // namespace cnn::sweep
