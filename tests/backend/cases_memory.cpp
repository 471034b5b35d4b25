// Sweep cases: device memory (alloc/release, upload/download, device copies, fill, synchronize).
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {
std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }
}  // namespace

CNN_SWEEP_CASES(memory) {
  // 9 MiB + 3 floats: three pieces through the CUDA backend's 4 MiB pinned staging buffers.
  const size_t big = (9u << 20) / sizeof(float) + 3;
  for (size_t n : {size_t{1}, size_t{1000}, big}) {
    add_case({"upload", "n=" + std::to_string(n), {"download"}, [n](Run& r) {
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
    add_case({"download", "n=" + std::to_string(n), {}, [n](Run& r) {
      const float* d = r.upload(random_vec(n + 7, 3 + n));
      // The whole buffer, then a range from an offset into the middle of a host buffer.
      r.output_host("whole", doubles(r.download(d, n + 7)), kExact);
      std::vector<float> host(n + 2, -9.f);
      r.be.download(host.data() + 1, d + 7, sizeof(float) * n);
      r.output_host("range, and the host values around it", doubles(host), kExact);
    }});
    add_case({"alloc", "n=" + std::to_string(n) + ", three buffers", {}, [n](Run& r) {
      // Fresh buffers are distinct: each keeps what was written to it while the others are written.
      std::vector<float*> d;
      for (int i = 0; i < 3; ++i) d.push_back(static_cast<float*>(r.be.alloc(sizeof(float) * n)));
      for (int i = 0; i < 3; ++i) r.be.upload(d[i], random_vec(n, 40 + i + n).data(), sizeof(float) * n);
      for (int i = 0; i < 3; ++i) r.output("buffer " + std::to_string(i), d[i], n, kExact);
      for (float* p : d) r.be.release(p);
    }});
    add_case({"release", "n=" + std::to_string(n), {}, [n](Run& r) {
      // What release returns is counted out again, also over many rounds of one size.
      const MemoryUse before = r.be.memory_use();
      bool back = true;
      for (int i = 0; i < 20; ++i) {
        r.be.release(r.be.alloc(sizeof(float) * n));
        back = back && r.be.memory_use().in_use == before.in_use;
      }
      r.output_host("in use back to before after each release", {back ? 1.0 : 0.0}, kExact);
    }});
    add_case({"copy", "n=" + std::to_string(n), {"synchronize"}, [n](Run& r) {
      const float* d_x = r.upload(random_vec(n, 2 + n));
      float* d_y = r.garbage(n + 3);
      r.be.copy(d_y + 3, d_x, sizeof(float) * n);
      r.be.synchronize();
      r.output("copy", d_y + 3, n, kExact);
    }});
  }
  add_case({"synchronize", "then a mirror's copy has landed", {}, [](Run& r) {
    // A device-to-host copy queued before synchronize() has finished when it returns: poll() never blocks.
    const size_t n = 1 << 20;
    float* d_x = r.garbage(n);
    r.be.fill(d_x, n, 3.f);
    auto mirror = r.be.make_host_mirror(d_x + n - 2, 2 * sizeof(float));
    mirror->refresh();
    r.be.synchronize();
    const auto* got = static_cast<const float*>(mirror->poll());
    r.output_host("landed, and its values", {got ? 1.0 : 0.0, got ? got[0] : 0.0, got ? got[1] : 0.0}, kExact);
  }});
  for (size_t n : {size_t{1}, size_t{255}, size_t{70001}}) {  // the last wraps a grid-stride loop
    add_case({"fill", "n=" + std::to_string(n), {}, [n](Run& r) {
      float* d = r.upload(std::vector<float>(n + 1, 7.f));
      r.be.fill(d, n, -2.5f);
      r.output("filled", d, n + 1, kExact);  // and the element after the range keeps its 7
    }});
  }
}

}  // namespace cnn::sweep
