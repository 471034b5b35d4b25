#include "tests/bench/bn_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <dnnl.hpp>
#include <functional>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/fast_cpu.h"
#include "kernels/cpu/graph_fast.h"
#include "tests/bench/alloc_count.h"

namespace cnn::bench {

namespace {

using dnnl::memory;

// Best and median of `reps` timed calls after one warm-up, in seconds; heap allocations of the timed calls
// added to *allocs.
std::pair<double, double> time_op(const std::function<void()>& f, int reps, uint64_t* allocs) {
  f();
  const uint64_t a0 = allocation_count();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  *allocs += allocation_count() - a0;
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

// oneDNN 2.6's batch normalization (scale, shift, fused ReLU; it has no fused residual add) on the same
// NHWC tensor: forward training and backward with the ReLU workspace.
struct OnednnBn {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward bwd;
  memory src, dst, scale, shift, mean, var, ws, ddst, dsrc, dscale, dshift;

  OnednnBn(int rows, int c, float* x, float* y, float* dy, float* dx) {
    const memory::desc md({rows, c, 1, 1}, memory::data_type::f32, memory::format_tag::nhwc);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift |
                       dnnl::normalization_flags::fuse_norm_relu;
    dnnl::batch_normalization_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, md, 1e-5f, flags}, eng);
    dnnl::batch_normalization_backward::primitive_desc bpd({dnnl::prop_kind::backward, md, md, 1e-5f, flags}, eng,
                                                           fpd);
    fwd = dnnl::batch_normalization_forward(fpd);
    bwd = dnnl::batch_normalization_backward(bpd);
    const memory::desc cd({c}, memory::data_type::f32, memory::format_tag::x);
    src = memory(md, eng, x);
    dst = memory(md, eng, y);
    ddst = memory(md, eng, dy);
    dsrc = memory(md, eng, dx);
    for (memory* m : {&scale, &shift, &mean, &var, &dscale, &dshift}) *m = memory(cd, eng);
    std::fill_n(static_cast<float*>(scale.get_data_handle()), c, 1.f);
    std::fill_n(static_cast<float*>(shift.get_data_handle()), c, 0.1f);
    ws = memory(fpd.workspace_desc(), eng);
  }
  void forward() {
    fwd.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
                       {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}, {DNNL_ARG_WORKSPACE, ws}});
  }
  void backward() {
    bwd.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
                       {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift},
                       {DNNL_ARG_WORKSPACE, ws},
                       {DNNL_ARG_DIFF_SRC, dsrc}, {DNNL_ARG_DIFF_SCALE, dscale}, {DNNL_ARG_DIFF_SHIFT, dshift}});
  }
};

}  // namespace

void bn_table(const std::vector<int>& threads, int reps) {
  struct Shape {
    const char* where;
    int rows, c;
  };
  const Shape shapes[] = {{"resnet20 stage 1 (b128)", 128 * 32 * 32, 16},
                          {"resnet20 stage 2", 128 * 16 * 16, 32},
                          {"resnet20 stage 3", 128 * 8 * 8, 64},
                          {"resnet50 stem (b32)", 32 * 112 * 112, 64},
                          {"resnet50 layer1 out", 32 * 56 * 56, 256},
                          {"resnet50 layer4 out", 32 * 7 * 7, 2048}};
  std::printf("\nBatch norm + ReLU, training forward and backward, op by op: own kernels (kernels/cpu/batchnorm_fast.cpp) "
              "vs oneDNN 2.6's batch_normalization\n(use_scale|use_shift|fuse_norm_relu), same NHWC tensors; "
              "median | best of %d, ms, and GB/s of the tensors each must touch\n(own: forward reads x twice and "
              "writes y, backward reads x and dy twice and writes dx; plus the 1-bit ReLU mask)\n", reps);
  std::printf("%-24s %12s %3s  %-22s %-22s %-22s %-22s %11s\n", "shape", "rows x c", "thr", "own fwd", "oneDNN fwd",
              "own bwd", "oneDNN bwd", "allocs/call");
  for (const Shape& s : shapes) {
    const size_t n = static_cast<size_t>(s.rows) * s.c;
    std::vector<float> x(n), y(n), dy(n), dx(n), gamma(s.c, 1.f), beta(s.c, 0.1f), mean(s.c), invstd(s.c),
        rmean(s.c, 0.f), rvar(s.c, 1.f), dgamma(s.c), dbeta(s.c);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i * 2654435761u % 1000) * 1e-3f - 0.5f;
      dy[i] = static_cast<float>(i * 40503u % 1000) * 1e-3f - 0.5f;
    }
    std::vector<uint32_t> mask(relu_mask_words(n));
    const double mb = n * 4.0 / 1e6;
    for (int t : threads) {
      omp_set_num_threads(t);
      OnednnBn dn(s.rows, s.c, x.data(), y.data(), dy.data(), dx.data());
      auto cell = [&](std::pair<double, double> tm, double streams) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%6.3f | %6.3f %5.1f", 1e3 * tm.second, 1e3 * tm.first,
                      streams * mb / 1e3 / tm.second);
        return std::string(buf);
      };
      uint64_t own_allocs = 0, dn_allocs = 0;
      const auto own_f = time_op(
          [&] {
            batchnorm_forward_train_fast(t, s.rows, s.c, x.data(), nullptr, gamma.data(), beta.data(), 1e-5f, 0.1f,
                                         true, y.data(), mask.data(), mean.data(), invstd.data(), rmean.data(),
                                         rvar.data());
          },
          reps, &own_allocs);
      const auto dn_f = time_op([&] { dn.forward(); }, reps, &dn_allocs);
      const auto own_b = time_op(
          [&] {
            batchnorm_backward_fast(t, s.rows, s.c, x.data(), mask.data(), dy.data(), gamma.data(), mean.data(),
                                    invstd.data(), dx.data(), nullptr, dgamma.data(), dbeta.data());
          },
          reps, &own_allocs);
      const auto dn_b = time_op([&] { dn.backward(); }, reps, &dn_allocs);
      std::printf("%-24s %7d x %-4d %3d  %-22s %-22s %-22s %-22s %5.1f %5.1f\n", s.where, s.rows, s.c, t,
                  cell(own_f, 3).c_str(), cell(dn_f, 3).c_str(), cell(own_b, 5).c_str(), cell(dn_b, 5).c_str(),
                  own_allocs / (2.0 * reps), dn_allocs / (2.0 * reps));
    }
  }
}

// The activation kernels on random inputs (kernels/cpu/graph_fast.cpp, built with -fno-trapping-math so that
// their comparisons become masks): with a per-element branch the backward ran 13-29x the forward (docs/perf.md);
// vectorised it moves 1.5x the forward's bytes, so "branch-free" means backward < 5x forward.
void activation_table(int reps) {
  const size_t n = size_t{1} << 22;  // 16 MB per array: out of cache
  std::vector<float> x(n), dy(n), y(n), dx(n);
  uint32_t r = 12345;
  for (size_t i = 0; i < n; ++i) {
    r = r * 1664525u + 1013904223u;
    x[i] = -4.f + 14.f * static_cast<float>(r >> 8) / 16777216.f;  // [-4, 10): ReLU6 inside 43% at random
    dy[i] = static_cast<float>(i % 7) - 3.f;
  }
  std::printf("\nActivations, 1 thread, 4M random elements: median | best of %d, ms (graph_fast.cpp)\n", reps);
  std::printf("%-10s %-16s %-16s %8s %s\n", "kind", "forward", "backward", "bwd/fwd", "branch-free (< 5x)");
  const std::pair<const char*, Activation> acts[] = {{"relu6", Activation{ActKind::kClip, 0.f, 6.f}},
                                                     {"leakyrelu", Activation{ActKind::kLeakyRelu, 0.1f, 0.f}}};
  for (const auto& [name, a] : acts) {
    uint64_t allocs = 0;
    const auto f = time_op([&] { activation_forward_fast(1, a, n, x.data(), y.data()); }, reps, &allocs);
    const auto b = time_op([&] { activation_backward_fast(1, a, n, x.data(), dy.data(), dx.data(), false); }, reps,
                           &allocs);
    std::printf("%-10s %6.2f | %6.2f  %6.2f | %6.2f  %7.1fx %s\n", name, 1e3 * f.second, 1e3 * f.first, 1e3 * b.second,
                1e3 * b.first, b.first / f.first, b.first < 5 * f.first ? "yes" : "NO: rebuilt with -ftrapping-math?");
  }
}

}  // namespace cnn::bench
