#include "src/comm/nccl_emu_types.h"

#include <cstdint>

#include "kernels/simt/simt.h"
#include "src/comm/mpi_wait.h"

namespace simt {
namespace nccl {
namespace types {

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;  // half, bfloat16
  }
}

MPI_Op mpi_op(ncclDataType_t t, ncclRedOp_t op) {
  // Half and bfloat16 travel as 16-bit words; their reductions compute in float (src/comm/mpi_half_ops.cpp).
  if (t == ncclFloat16 || t == ncclBfloat16) {
    const cnn::Mpi16Op k = op == ncclProd ? cnn::Mpi16Op::kProd
                           : op == ncclMax ? cnn::Mpi16Op::kMax
                           : op == ncclMin ? cnn::Mpi16Op::kMin
                                           : cnn::Mpi16Op::kSum;  // sum; average divides afterwards
    return cnn::mpi_16bit_op(t == ncclBfloat16, k);
  }
  switch (op) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;  // sum; average divides afterwards
  }
}

namespace {

template <class T>
void divide(void* p, size_t n, int by) {
  T* x = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] / by);
}

}  // namespace

void average(void* p, size_t n, ncclDataType_t t, int ranks) {
  switch (t) {
    case ncclInt8: return divide<int8_t>(p, n, ranks);
    case ncclUint8: return divide<uint8_t>(p, n, ranks);
    case ncclInt32: return divide<int32_t>(p, n, ranks);
    case ncclUint32: return divide<uint32_t>(p, n, ranks);
    case ncclInt64: return divide<int64_t>(p, n, ranks);
    case ncclUint64: return divide<uint64_t>(p, n, ranks);
    case ncclFloat32: return divide<float>(p, n, ranks);
    case ncclFloat64: return divide<double>(p, n, ranks);
    case ncclFloat16: case ncclBfloat16: {
      auto* h = static_cast<uint16_t*>(p);
      const bool half = t == ncclFloat16;
      for (size_t i = 0; i < n; ++i) {
        const float v = (half ? detail::half_bits_to_float(h[i]) : detail::bf16_bits_to_float(h[i])) / ranks;
        h[i] = half ? detail::float_to_half_bits(v) : detail::float_to_bf16_bits(v);
      }
      return;
    }
    default: return;
  }
}

}  // namespace types
}  // namespace nccl
}  // namespace simt
