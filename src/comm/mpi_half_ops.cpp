// MPI reductions over 16-bit floating-point words (MPI has no bf16/fp16 type): each pair of elements is
// widened to float, combined in float and rounded back to nearest even with the bit routines the SIMT
// emulator and the CPU kernels use (kernels/simt/half_bits.h). The 16-bit gradient allreduce
// (--comm.grad_dtype) and the emulated NCCL's ncclHalf/ncclBfloat16 reductions use them.
#include "kernels/simt/half_bits.h"
#include "src/comm/mpi_wait.h"

namespace cnn {

namespace {

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), Mpi16Op Op>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    const float r = Op == Mpi16Op::kSum    ? x + y
                    : Op == Mpi16Op::kProd ? x * y
                    : Op == Mpi16Op::kMax  ? (x > y ? x : y)
                                           : (x < y ? x : y);
    b[i] = FromFloat(r);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
MPI_Op op_of(Mpi16Op op) {
  // Created on first use by the MPI main thread (MPI_THREAD_FUNNELED) and kept until MPI_Finalize.
  static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_User_function* const fns[4] = {
      combine<ToFloat, FromFloat, Mpi16Op::kSum>, combine<ToFloat, FromFloat, Mpi16Op::kProd>,
      combine<ToFloat, FromFloat, Mpi16Op::kMax>, combine<ToFloat, FromFloat, Mpi16Op::kMin>};
  const int k = static_cast<int>(op);
  if (ops[k] == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(fns[k], /*commute=*/1, &ops[k]));
  return ops[k];
}

}  // namespace

MPI_Op mpi_16bit_op(bool bf16, Mpi16Op op) {
  using namespace simt::detail;
  return bf16 ? op_of<bf16_bits_to_float, float_to_bf16_bits>(op) : op_of<half_bits_to_float, float_to_half_bits>(op);
}

}  // namespace cnn
