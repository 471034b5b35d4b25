// Device-side built-ins that kernels call besides the synchronisation primitives: atomics, bit tricks,
// fast-math intrinsics and the overloaded min/max CUDA puts in the global namespace. Atomics are plain
// read-modify-writes: fibers of one host thread switch only at known points, never inside one.
#pragma once
#include <math.h>

#include <cstdint>
#include <cstring>

namespace simt {
namespace detail {
// True while a launch interleaves several blocks (simt::set_resident_blocks): atomics and fences then end
// the calling thread's turn once they are done, so that other blocks' threads run between them.
inline thread_local bool t_switch_at_atomics = false;
void yield_turn();
inline void atomic_point() {
  if (t_switch_at_atomics) yield_turn();
}
// The read-modify-write of every atomic: *a = f(old), returns old.
template <typename T, typename F>
inline T atomic_rmw(T* a, F f) {
  const T old = *a;
  *a = f(old);
  atomic_point();
  return old;
}
}  // namespace detail
}  // namespace simt

#define CNN_SIMT_ATOMIC(name, T, expr)                                                   \
  inline T name(T* a, T v) {                                                             \
    return ::simt::detail::atomic_rmw(a, [v](T o) { (void)o; return static_cast<T>(expr); }); \
  }
CNN_SIMT_ATOMIC(atomicAdd, int, o + v)
CNN_SIMT_ATOMIC(atomicAdd, unsigned, o + v)
CNN_SIMT_ATOMIC(atomicAdd, unsigned long long, o + v)
CNN_SIMT_ATOMIC(atomicAdd, float, o + v)
CNN_SIMT_ATOMIC(atomicAdd, double, o + v)
CNN_SIMT_ATOMIC(atomicSub, int, o - v)
CNN_SIMT_ATOMIC(atomicSub, unsigned, o - v)
CNN_SIMT_ATOMIC(atomicMax, int, v > o ? v : o)
CNN_SIMT_ATOMIC(atomicMax, unsigned, v > o ? v : o)
CNN_SIMT_ATOMIC(atomicMax, long long, v > o ? v : o)
CNN_SIMT_ATOMIC(atomicMin, int, v < o ? v : o)
CNN_SIMT_ATOMIC(atomicMin, unsigned, v < o ? v : o)
CNN_SIMT_ATOMIC(atomicMin, long long, v < o ? v : o)
CNN_SIMT_ATOMIC(atomicAnd, int, o & v)
CNN_SIMT_ATOMIC(atomicAnd, unsigned, o & v)
CNN_SIMT_ATOMIC(atomicOr, int, o | v)
CNN_SIMT_ATOMIC(atomicOr, unsigned, o | v)
CNN_SIMT_ATOMIC(atomicXor, int, o ^ v)
CNN_SIMT_ATOMIC(atomicXor, unsigned, o ^ v)
CNN_SIMT_ATOMIC(atomicExch, int, v)
CNN_SIMT_ATOMIC(atomicExch, unsigned, v)
CNN_SIMT_ATOMIC(atomicExch, unsigned long long, v)
CNN_SIMT_ATOMIC(atomicExch, float, v)
#undef CNN_SIMT_ATOMIC
inline int atomicCAS(int* a, int cmp, int v) {
  return ::simt::detail::atomic_rmw(a, [=](int o) { return o == cmp ? v : o; });
}
inline unsigned atomicCAS(unsigned* a, unsigned cmp, unsigned v) {
  return ::simt::detail::atomic_rmw(a, [=](unsigned o) { return o == cmp ? v : o; });
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp, unsigned long long v) {
  return ::simt::detail::atomic_rmw(a, [=](unsigned long long o) { return o == cmp ? v : o; });
}

// Nothing to order (host memory is coherent, and fibers switch only at known points); with interleaved
// blocks, fences and sleeps end the thread's turn, since what they wait or order for is other threads' work.
inline void __threadfence() { ::simt::detail::atomic_point(); }
inline void __threadfence_block() { ::simt::detail::atomic_point(); }
inline void __nanosleep(unsigned) { ::simt::detail::atomic_point(); }

template <typename T>
inline T __ldg(const T* p) { return *p; }

inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}

// The GPU's fast approximations are replaced by the accurate functions: tests compare against CPU
// references with tolerances that must hold on the device as well.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }

inline int min(int a, int b) { return b < a ? b : a; }
inline int max(int a, int b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return b < a ? b : a; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long min(long long a, long long b) { return b < a ? b : a; }
inline long long max(long long a, long long b) { return a < b ? b : a; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return b < a ? b : a; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a < b ? b : a; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
