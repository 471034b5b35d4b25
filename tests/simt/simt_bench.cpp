// Fiber switch rate of the SIMT emulator, hand-written context switch vs the ucontext fallback: a bare
// ping-pong between the scheduler and one fiber, then kernels whose cost is all barriers or all shuffles.
// Prints one line per measurement (thread CPU time); the figures in kernels/simt/README.md come from here.
#include <time.h>

#include <cstdio>

#include "kernels/simt/cuda_compat.h"
#include "kernels/simt/fiber.h"

namespace {

__global__ void barrier_loop_kernel(int iterations, int* out) {
  int v = 0;
  for (int i = 0; i < iterations; ++i) {
    v += threadIdx.x;
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

__global__ void shuffle_loop_kernel(int iterations, float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < iterations; ++i) v += __shfl_xor_sync(0xffffffffu, v, 1 + i % 16) * 0.5f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Thread CPU time, so that other processes on a shared machine distort the figures less.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

simt::detail::Fiber* g_fiber;
void ping_pong(void* arg) {
  const long n = *static_cast<long*>(arg);
  for (long i = 0; i < n; ++i) g_fiber->yield();
}

// Switches per second of a kernel whose threads each run `iterations` steps of one synchronising `op`.
template <class T>
void time_loop(const char* name, const char* label, const char* op, void (*kernel)(int, T*), T* out) {
  const int iterations = 200, grid = 16, block = 256;
  const uint64_t sw0 = simt::fiber_switches();
  const double t0 = cpu_seconds();
  CNN_LAUNCH(kernel, grid, block, 0, 0, iterations, out);
  const double s = cpu_seconds() - t0;
  const double switches = static_cast<double>(simt::fiber_switches() - sw0);
  std::printf("%-9s %-21s %7.1f M switches/s, %6.2f M thread-%s/s\n", name, label, switches / s / 1e6,
              1.0 * grid * block * iterations / s / 1e6, op);
}

void bench(const char* name) {
  {
    simt::detail::Fiber fiber;
    g_fiber = &fiber;
    long n = 2000000;
    fiber.reset(&ping_pong, &n);
    const double t0 = cpu_seconds();
    while (!fiber.finished()) fiber.resume();
    const double s = cpu_seconds() - t0;
    std::printf("%-9s bare ping-pong        %7.1f M switches/s\n", name, 2.0 * n / s / 1e6);
  }
  int* d_out;
  float* d_f;
  cudaMalloc(&d_out, 64 * sizeof(int));
  cudaMalloc(&d_f, 64 * 256 * sizeof(float));
  time_loop(name, "__syncthreads loop", "barriers", barrier_loop_kernel, d_out);
  time_loop(name, "__shfl_xor_sync loop", "shuffles", shuffle_loop_kernel, d_f);
  {
    const int n = 1 << 20;
    float *d_x, *d_y;
    cudaMalloc(&d_x, n * sizeof(float));
    cudaMalloc(&d_y, n * sizeof(float));
    const double t0 = cpu_seconds();
    CNN_LAUNCH(saxpy_kernel, n / 256, 256, 0, 0, n, 2.0f, d_x, d_y);
    const double s = cpu_seconds() - t0;
    std::printf("%-9s elementwise, 1 thread/element  %6.2f M threads/s\n", name, n / s / 1e6);
    cudaFree(d_x);
    cudaFree(d_y);
  }
  cudaFree(d_out);
  cudaFree(d_f);
}

}  // namespace

int main() {
  simt::set_context_kind(simt::ContextKind::kAsm);
  bench("asm");
  simt::set_context_kind(simt::ContextKind::kUcontext);
  bench("ucontext");
  return 0;
}
