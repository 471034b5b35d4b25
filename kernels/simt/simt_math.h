// Device-side built-ins that kernels call besides the synchronisation primitives: atomics, bit tricks,
// fast-math intrinsics and the overloaded min/max CUDA puts in the global namespace. Atomics are plain
// read-modify-writes: fibers switch only inside barriers and warp intrinsics, and the blocks of a grid run
// one after another on the launching host thread, so nothing can interleave with them.
#pragma once
#include <math.h>

#include <cstdint>
#include <cstring>

inline int atomicAdd(int* a, int v) { int o = *a; *a = o + v; return o; }
inline unsigned atomicAdd(unsigned* a, unsigned v) { unsigned o = *a; *a = o + v; return o; }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  unsigned long long o = *a;
  *a = o + v;
  return o;
}
inline float atomicAdd(float* a, float v) { float o = *a; *a = o + v; return o; }
inline double atomicAdd(double* a, double v) { double o = *a; *a = o + v; return o; }
inline int atomicSub(int* a, int v) { int o = *a; *a = o - v; return o; }
inline unsigned atomicSub(unsigned* a, unsigned v) { unsigned o = *a; *a = o - v; return o; }
inline int atomicMax(int* a, int v) { int o = *a; if (v > o) *a = v; return o; }
inline unsigned atomicMax(unsigned* a, unsigned v) { unsigned o = *a; if (v > o) *a = v; return o; }
inline long long atomicMax(long long* a, long long v) { long long o = *a; if (v > o) *a = v; return o; }
inline int atomicMin(int* a, int v) { int o = *a; if (v < o) *a = v; return o; }
inline unsigned atomicMin(unsigned* a, unsigned v) { unsigned o = *a; if (v < o) *a = v; return o; }
inline long long atomicMin(long long* a, long long v) { long long o = *a; if (v < o) *a = v; return o; }
inline int atomicAnd(int* a, int v) { int o = *a; *a = o & v; return o; }
inline unsigned atomicAnd(unsigned* a, unsigned v) { unsigned o = *a; *a = o & v; return o; }
inline int atomicOr(int* a, int v) { int o = *a; *a = o | v; return o; }
inline unsigned atomicOr(unsigned* a, unsigned v) { unsigned o = *a; *a = o | v; return o; }
inline int atomicXor(int* a, int v) { int o = *a; *a = o ^ v; return o; }
inline unsigned atomicXor(unsigned* a, unsigned v) { unsigned o = *a; *a = o ^ v; return o; }
inline int atomicExch(int* a, int v) { int o = *a; *a = v; return o; }
inline unsigned atomicExch(unsigned* a, unsigned v) { unsigned o = *a; *a = v; return o; }
inline unsigned long long atomicExch(unsigned long long* a, unsigned long long v) {
  unsigned long long o = *a;
  *a = v;
  return o;
}
inline float atomicExch(float* a, float v) { float o = *a; *a = v; return o; }
inline int atomicCAS(int* a, int cmp, int v) { int o = *a; if (o == cmp) *a = v; return o; }
inline unsigned atomicCAS(unsigned* a, unsigned cmp, unsigned v) { unsigned o = *a; if (o == cmp) *a = v; return o; }
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp, unsigned long long v) {
  unsigned long long o = *a;
  if (o == cmp) *a = v;
  return o;
}

inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __nanosleep(unsigned) {}

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
