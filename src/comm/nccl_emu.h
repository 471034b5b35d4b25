// The emulated NCCL: the subset of the NCCL API that cnntrain calls, with NCCL's names, types, values and
// semantics, implemented over MPI and ordered by the SIMT emulator's streams and events. The NCCL-calling
// source (src/comm/nccl_collectives.cu) is compiled against this by g++ (cnn::emu, --device emu) and
// against <nccl.h> by nvcc (cnn::gpu, --device cuda), through src/comm/nccl_compat.h; so `mpirun -np N
// cnntrain --device emu` runs the real bootstrap, bucketing and watchdog code in CI.
//
// Semantics kept: a collective is enqueued on its stream and runs when the stream reaches it (at once when
// the emulator's streams are not deferred); in-place forms as NCCL defines them; ncclGroupStart/End; a
// non-blocking communicator (config.blocking = 0) returns ncclInProgress from creation, from ncclCommFinalize
// and, at seeded random calls (CNNTRAIN_NCCL_EMU_SEED, default 1; 0: never), from collectives, until
// ncclCommGetAsyncError, polled by the creating thread, reports ncclSuccess (a collective is enqueued only
// then, and calling anything else meanwhile is invalid); ncclCommAbort from any thread makes collectives in
// progress give up, and a call it interrupts returns ncclInProgress (it never completed); asynchronous errors
// show in ncclCommGetAsyncError.
// Strictness (real NCCL would crash or hang where these report): an aborted or destroyed communicator is
// poisoned and freed only later, so any call naming it afterwards fails with ncclInvalidUsage; a
// non-blocking communicator must be finalized (ncclCommFinalize, then polled to ncclSuccess) before
// ncclCommDestroy, whose implicit finalize would block without a deadline. Each such invalid use is printed to
// stderr as "nccl-emu: invalid use: CALL: ..." and kept for emu_invalid_uses().
// Limits: a communicator spans all MPI ranks with NCCL rank = MPI rank (what cnntrain creates; anything else
// is ncclInvalidArgument); collectives run on the thread that synchronises the stream, which must be the MPI
// main thread (MPI_THREAD_FUNNELED), and only the creating thread's polls and ncclCommFinalize make progress;
// counts up to 2^31-1 elements; fp8 types are not emulated; calls inside a group never return ncclInProgress.
//
// Test hook (documented in docs/gpu_clusters.md): CNNTRAIN_NCCL_EMU_FAULT=KIND:RANK:K[,...] makes rank RANK, at
// its K-th collective call (1-based, counted over all communicators), either stall (KIND=stall: the call does
// not return before an abort, as a rank whose host or GPU hangs) or report an asynchronous error (KIND=error:
// the call enqueues nothing and the communicator's async error becomes ncclRemoteError). The watchdog tests
// use it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/simt/cuda_runtime_emu.h"

#define CNN_NCCL_EMULATED 1
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION_CODE 22800
#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define NCCL_CONFIG_INITIALIZER {sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT}

namespace simt {
namespace nccl {

typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10
} ncclDataType_t;

// Only `blocking` is emulated; the header fields let NCCL_CONFIG_INITIALIZER be checked as NCCL does.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} ncclConfig_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

// Not NCCL: the invalid uses reported so far in this process, oldest first (for tests).
std::vector<std::string> emu_invalid_uses();

}  // namespace nccl
}  // namespace simt

using namespace simt::nccl;  // NOLINT(google-global-names-in-headers): the NCCL API is global
