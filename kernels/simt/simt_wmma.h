// nvcuda::wmma, the tensor-core warp matrix API of CUDA's <mma.h>, for the emulator: m16n16k16 fragments of
// __half or __nv_bfloat16 (matrix_a, matrix_b; row- or column-major) and float accumulators, with
// fill_fragment, load_matrix_sync, store_matrix_sync and mma_sync. Included by simt.h; kernels use it as on
// the GPU.
//
// How fragments are spread over the lanes of a warp is unspecified in CUDA and differs between
// architectures; the emulator's mapping is its own, not any GPU's. Every lane holds the whole 16x16 tile of a
// matrix_a/matrix_b fragment (num_elements = 256) and 8 elements of an accumulator, so the lanes load and
// store disjoint parts of the result and mma_sync costs each lane 8 dot products. Which element sits where is
// ::simt::detail::WmmaMap (simt.h): by default x[i] of a matrix_a/b fragment is tile element (i / 16, i % 16) and
// accumulator element i of lane l is tile element 32 i + l; with simt::set_wmma_scramble
// (CNNTRAIN_SIMT_WMMA_SCRAMBLE=1) every launch draws its own permutations, per lane for matrix_a/b and across lanes for accumulators. Code
// that treats fragments as CUDA allows (element-wise, the same operation on every element) gives the same
// results under any mapping; code that reads meaning into frag.x[i] does not, and fails when scrambled.
// Every call is warp-collective, as on the GPU: it starts with a full-warp rendezvous, so lanes that do not
// all reach the same call (divergence, an exited lane) are reported with the source line. Pointers must be 32-byte
// aligned and ldm a multiple of 16 bytes (CUDA's rules); violations are kernel faults naming the line.
// mma_sync computes d = a*b + c in fp32: the products of two 16-bit values are exact in fp32 and are added
// to c in k order; tensor cores sum in another order, which the 16-bit tolerance of the kernel tests covers.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {

// The warp rendezvous every call starts with. It hands every lane lane 0's call site: lanes that meet in
// different wmma calls (divergent code) are an error, as on the GPU they are undefined behaviour.
inline void enter(const char* file, int line) {
  uint64_t site = static_cast<uint32_t>(line);
  for (const char* c = file; *c; ++c) site = site * 1099511628211ull + static_cast<unsigned char>(*c);
  site = (site << 32) | static_cast<uint32_t>(line);
  const uint64_t lead =
      ::simt::detail::warp_op(::simt::detail::WarpOp::kMatrix, 0xffffffffu, site, 0, warpSize, file, line);
  if (lead != site)
    ::simt::detail::kernel_fault(cudaErrorLaunchFailure,
                                 std::string(file) + ":" + std::to_string(line) + ": divergent wmma: lane " +
                                     std::to_string(threadIdx.x % 32) + " calls a wmma::*_sync here while lane 0 "
                                     "calls another (line " + std::to_string(static_cast<uint32_t>(lead)) +
                                     "); every lane of the warp must make the same call");
}

inline void check_pointer(const void* p, unsigned ldm, size_t elem, const char* what, const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ::simt::detail::kernel_fault(cudaErrorMisalignedAddress,
                                 std::string(file) + ":" + std::to_string(line) + ": wmma::" + what +
                                     ": the pointer is not 32-byte (256-bit) aligned");
  if ((ldm * elem) % 16 != 0)
    ::simt::detail::kernel_fault(cudaErrorMisalignedAddress,
                                 std::string(file) + ":" + std::to_string(line) + ": wmma::" + what + ": ldm " +
                                     std::to_string(ldm) + " is not a multiple of 16 bytes");
}

// Offset of element (r, c) of a tile stored with leading dimension ldm.
inline size_t offset(int r, int c, unsigned ldm, bool row) {
  return row ? static_cast<size_t>(r) * ldm + c : static_cast<size_t>(c) * ldm + r;
}

inline int lane() {
  return static_cast<int>((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize);
}

// Where this lane keeps each tile element of a matrix_a or matrix_b fragment.
template <class Use>
inline const uint8_t* slot_of(const ::simt::detail::WmmaMap& m) {
  return std::is_same<Use, matrix_a>::value ? m.a_slot[lane()] : m.b_slot[lane()];
}
// Tile element of accumulator element i in this lane.
inline int acc_element(const ::simt::detail::WmmaMap& m, int i) { return m.acc[32 * i + lane()]; }

}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator implements the m16n16k16 shape only");

 public:
  static constexpr int num_elements = std::is_same<Use, accumulator>::value ? 8 : 256;
  T x[num_elements];  // which tile element each is: see ::simt::detail::WmmaMap (simt.h)
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const T& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  detail::enter(file, line);
  detail::check_pointer(p, ldm, sizeof(T), "load_matrix_sync", file, line);
  const bool row = std::is_same<Layout, row_major>::value;
  const ::simt::detail::WmmaMap& m = ::simt::detail::wmma_map();
  if (!m.scrambled) {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[detail::offset(r, c, ldm, row)];
    return;
  }
  const uint8_t* slot = detail::slot_of<Use>(m);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[slot[r * 16 + c]] = p[detail::offset(r, c, ldm, row)];
}

template <int M, int N, int K>
inline void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  detail::enter(file, line);
  detail::check_pointer(p, ldm, sizeof(float), "load_matrix_sync", file, line);
  const ::simt::detail::WmmaMap& m = ::simt::detail::wmma_map();
  for (int i = 0; i < f.num_elements; ++i) {
    const int e = detail::acc_element(m, i);
    f.x[i] = p[detail::offset(e / 16, e % 16, ldm, layout == mem_row_major)];
  }
}

template <int M, int N, int K>
inline void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout,
                              const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  detail::enter(file, line);
  detail::check_pointer(p, ldm, sizeof(float), "store_matrix_sync", file, line);
  const ::simt::detail::WmmaMap& m = ::simt::detail::wmma_map();
  for (int i = 0; i < f.num_elements; ++i) {
    const int e = detail::acc_element(m, i);
    p[detail::offset(e / 16, e % 16, ldm, layout == mem_row_major)] = f.x[i];
  }
}

template <int M, int N, int K, class T, class LayoutA, class LayoutB>
inline void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LayoutA>& a,
                     const fragment<matrix_b, M, N, K, T, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  detail::enter(file, line);
  const ::simt::detail::WmmaMap& m = ::simt::detail::wmma_map();
  if (!m.scrambled) {
    // This lane's 8 outputs under the fixed mapping: rows 2i + lane/16 of a, column lane%16 of b (widened once).
    const int col = detail::lane() % 16;
    float b_col[16];
    for (int k = 0; k < 16; ++k) b_col[k] = static_cast<float>(b.x[k * 16 + col]);
    for (int i = 0; i < d.num_elements; ++i) {
      const int row = detail::acc_element(m, i) / 16;
      float acc = c.x[i];
      for (int k = 0; k < 16; ++k) acc += static_cast<float>(a.x[row * 16 + k]) * b_col[k];
      d.x[i] = acc;
    }
    return;
  }
  const uint8_t* a_slot = detail::slot_of<matrix_a>(m);
  const uint8_t* b_slot = detail::slot_of<matrix_b>(m);
  // This lane's 8 outputs, each a row of a times a column of b.
  for (int i = 0; i < d.num_elements; ++i) {
    const int e = detail::acc_element(m, i), row = e / 16, col = e % 16;
    float acc = c.x[i];
    for (int k = 0; k < 16; ++k)
      acc += static_cast<float>(a.x[a_slot[row * 16 + k]]) * static_cast<float>(b.x[b_slot[k * 16 + col]]);
    d.x[i] = acc;
  }
}

}  // namespace wmma
}  // namespace nvcuda
