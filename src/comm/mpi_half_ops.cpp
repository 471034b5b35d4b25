// MPI reductions over 16-bit floating-point words (MPI has no bf16/fp16 type): each pair of elements is
// widened to float, combined in float and rounded back to nearest even with the bit routines the SIMT
// emulator and the CPU kernels use (src/base/half_bits.h). The 16-bit gradient allreduce
// (--comm.grad_dtype) and the emulated NCCL's ncclHalf/ncclBfloat16 reductions use them.
#include "src/base/half_bits.h"
#include "src/comm/mpi_wait.h"

namespace cnn {

namespace {

using Widen = void (*)(const uint16_t*, float*, size_t);
using Narrow = void (*)(const float*, uint16_t*, size_t);

// Blocks of a few hundred elements widened into stack buffers, so that the conversions and the arithmetic
// run as vector loops (half_bits.h's array routines).
template <Widen ToFloats, Narrow FromFloats, Mpi16Op Op>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  constexpr int kBlock = 512;
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  float x[kBlock], y[kBlock];
  for (int start = 0; start < *len; start += kBlock) {
    const int n = *len - start < kBlock ? *len - start : kBlock;
    ToFloats(a + start, x, n);
    ToFloats(b + start, y, n);
    for (int i = 0; i < n; ++i)
      y[i] = Op == Mpi16Op::kSum    ? x[i] + y[i]
             : Op == Mpi16Op::kProd ? x[i] * y[i]
             : Op == Mpi16Op::kMax  ? (x[i] > y[i] ? x[i] : y[i])
                                    : (x[i] < y[i] ? x[i] : y[i]);
    FromFloats(y, b + start, n);
  }
}

template <Widen ToFloats, Narrow FromFloats>
MPI_Op op_of(Mpi16Op op) {
  // Created on first use by the MPI main thread (MPI_THREAD_FUNNELED) and kept until MPI_Finalize.
  static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_User_function* const fns[4] = {
      combine<ToFloats, FromFloats, Mpi16Op::kSum>, combine<ToFloats, FromFloats, Mpi16Op::kProd>,
      combine<ToFloats, FromFloats, Mpi16Op::kMax>, combine<ToFloats, FromFloats, Mpi16Op::kMin>};
  const int k = static_cast<int>(op);
  if (ops[k] == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(fns[k], /*commute=*/1, &ops[k]));
  return ops[k];
}

}  // namespace

MPI_Op mpi_16bit_op(bool bf16, Mpi16Op op) {
  using namespace simt::detail;
  return bf16 ? op_of<bf16_bits_to_floats, floats_to_bf16_bits>(op)
              : op_of<half_bits_to_floats, floats_to_half_bits>(op);
}

}  // namespace cnn
