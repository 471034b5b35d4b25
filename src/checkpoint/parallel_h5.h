// Internal to src/checkpoint: what the writer (checkpoint_write.cpp) and the reader (checkpoint_read.cpp)
// share: each rank's share of an array, the checksums combined over the shares, the MPI-IO property lists,
// and how the ranks agree after each collective step. MPI-IO code: includes mpi.h through parallel HDF5.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/h5_util.h"
#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"

namespace cnn::ckpt {

// The rows [row0, row0+rows) of dimension 0 that `rank` writes or reads: contiguous bytes of the array.
struct Share {
  hsize_t row0 = 0, rows = 0;
  size_t elem0 = 0, elems = 0;
};

Share share_of(const CheckpointArray& a, int rank, int world);

// CRC-32 of every array, each rank hashing only its share and the pieces combined in rank order (collective).
std::vector<uint32_t> combined_crcs(const std::vector<CheckpointArray>& arrays);

// File access through MPI-IO on MPI_COMM_WORLD.
H5Handle mpio_fapl();
// Each rank's share of a tensor is one contiguous byte range, so independent MPI-IO transfers are large
// and aligned; collective buffering (two-phase I/O) only adds a shuffle between ranks. CNNTRAIN_CKPT_IO=
// collective selects it anyway (e.g. for file systems that prefer few, aggregated writers).
H5Handle collective_dxpl();
// Selects this rank's rows in the file space; returns the matching memory space.
H5Handle select_share(hid_t fspace, const CheckpointArray& a, const Share& s);

// The directory part of a path ("." when there is none).
std::string dir_of(const std::string& path);
// "rank R on HOST", for messages about one rank's I/O.
std::string on_this_rank();

// What one rank knows of a collective operation: the first thing that went wrong here, if anything.
struct Verdict {
  bool ok = true;
  std::string msg;
  void fail(const std::string& m) {
    if (ok) msg = m;
    ok = false;
  }
};

// The ranks' agreement after a collective step: whether the ranks hold the HDF5 object the step created
// consistently (all or none: only then may the holders close it, which is collective) and the lowest rank
// that has failed so far.
struct Agreement {
  bool consistent = true;
  int first_failed = 0;  // world_size() when no rank failed
  bool all_ok() const { return first_failed == world_size(); }
};

// Collective: one small allreduce.
Agreement agree(bool holds_object, const Verdict& v);
// The message of the lowest failing rank, on every rank (collective).
std::string failure_message(const Agreement& a, const Verdict& v);

}  // namespace cnn::ckpt
