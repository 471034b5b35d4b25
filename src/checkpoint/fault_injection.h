// Test hooks of the checkpoint code (documented in docs/checkpoints.md, "Fault injection"): environment
// variables that make one rank's checkpoint I/O fail, so the tests can prove that every rank leaves a
// failed write or read together, with exit code 4, instead of hanging. Unset (always, outside tests), they
// cost one getenv per process.
//   CNNTRAIN_TEST_CKPT_FAULT=write:R:K   rank R's K-th dataset write (counted over the process's life,
//                                        from 1) reports failure, after really writing
//   CNNTRAIN_TEST_CKPT_FAULT=attr:R:K    rank R's K-th attribute write (counted likewise: each dataset's
//                                        crc32, then the file's attributes) reports failure
//   CNNTRAIN_TEST_CKPT_FAULT=open:R      rank R's open of a checkpoint for reading reports failure (the file
//                                        was opened collectively and is closed by every rank)
//   CNNTRAIN_TEST_CKPT_FAULT=stat:R      rank R does not see the checkpoint it is to read
//   CNNTRAIN_TEST_CKPT_SLEEP_MS=N        every rank sleeps N ms before closing a checkpoint being written
//                                        (widens the window for the kill tests)
// Failures are reported after the real call, so HDF5's state stays the same on every rank, as after a
// failure the library reports on one rank only (a full disk, an I/O error).
#pragma once
#include <string>

namespace cnn {

enum class CkptFault { kWrite, kAttr, kOpen, kStat };

// True when the hook asks this rank's next `kind` operation to fail (each call counts one operation).
bool inject_ckpt_fault(CkptFault kind);
// Replaces the environment's setting (same syntax; "" turns faults off) and restarts the counts: for tests
// that inject several faults in one process.
void set_ckpt_fault(const std::string& spec);
// Sleeps as CNNTRAIN_TEST_CKPT_SLEEP_MS says (no-op when unset).
void ckpt_fault_delay();

}  // namespace cnn
