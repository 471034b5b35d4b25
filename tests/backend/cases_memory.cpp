// Sweep cases: device memory (alloc/release, upload/download, device copies, fill).
#include "tests/backend/sweep.h"

namespace cnn::sweep {

CNN_SWEEP_CASES(memory) {
  // 9 MiB + 3 floats: three pieces through the CUDA backend's 4 MiB pinned staging buffers.
  const size_t big = (9u << 20) / sizeof(float) + 3;
  for (size_t n : {size_t{1}, size_t{1000}, big}) {
    add_case({"upload", "n=" + std::to_string(n), {"alloc", "release", "download"}, [n](Run& r) {
      // Into the middle of a larger buffer: the destination offset must be honoured.
      float* d = r.garbage(n + 10);
      auto x = random_vec(n, 1 + n);
      r.be.upload(d + 5, x.data(), sizeof(float) * n);
      r.output("buffer", d + 5, n, kExact);
      // Downloading from an offset of the buffer.
      std::vector<float> tail(1);
      r.be.download(tail.data(), d + 5 + n - 1, sizeof(float));
      r.output_host("last element", {tail[0]}, kExact);
    }});
    add_case({"copy", "n=" + std::to_string(n), {"synchronize"}, [n](Run& r) {
      const float* d_x = r.upload(random_vec(n, 2 + n));
      float* d_y = r.garbage(n + 3);
      r.be.copy(d_y + 3, d_x, sizeof(float) * n);
      r.be.synchronize();
      r.output("copy", d_y + 3, n, kExact);
    }});
  }
  for (size_t n : {size_t{1}, size_t{255}, size_t{70001}}) {  // the last wraps a grid-stride loop
    add_case({"fill", "n=" + std::to_string(n), {}, [n](Run& r) {
      float* d = r.upload(std::vector<float>(n + 1, 7.f));
      r.be.fill(d, n, -2.5f);
      r.output("filled", d, n + 1, kExact);  // and the element after the range keeps its 7
    }});
  }
}

}  // namespace cnn::sweep
