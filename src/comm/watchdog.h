// The collective watchdog: every collective, host MPI or device NCCL, has a deadline (--comm.timeout_s,
// default 600 s) counted from the moment this rank arrives at it. On a timeout or an asynchronous NCCL
// error, the ranks that can still act say which ranks did not arrive at which collective (step, bucket or
// name; see heartbeat.h for how they know), abort the device communicators (ncclCommAbort) and then the job
// (MPI_Abort), so a job never hangs silently.
//
// Threads. MPI is initialised MPI_THREAD_FUNNELED: only the main thread calls MPI, and the watchdog thread
// never does. The main thread waits for every MPI collective in a polling loop (MPI_Test) that checks the
// deadline itself and aborts from the main thread. The watchdog thread polls what the main thread cannot:
// device collectives (the probes of the NCCL implementation: cudaEventQuery, ncclCommGetAsyncError) and
// opaque collective sections (checkpoint I/O inside HDF5). When it fires it reports, runs the abort hooks
// (ncclCommAbort, which is safe from another thread and unblocks the device) and asks the main thread to
// call MPI_Abort at its next check; if the main thread does not within a grace period (it is blocked where
// it cannot look, e.g. inside MPI-IO), the watchdog thread ends its own process with _exit, which mpirun and
// srun --kill-on-bad-exit turn into the end of the whole job.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "src/comm/heartbeat.h"

namespace cnn {

// Deadline of every collective; applies from the next collective on. Default 600 s.
void set_collective_timeout(double seconds);
double collective_timeout();

// Starts the watchdog thread and this rank's heartbeat file in `heartbeat_dir` (created by the caller and
// visible to every rank; empty: no side channel, timeouts then cannot name the missing ranks). Stopped by
// stop_watchdog() or comm_finalize().
void start_watchdog(const std::string& heartbeat_dir);
void stop_watchdog();

// The training step collectives belong to, for the names in reports and heartbeats.
void set_collective_step(int64_t step);
int64_t collective_step();

// Host collectives, main thread only: `begin` returns the collective's sequence number on `channel` and
// marks this rank arrived; `end` marks it completed. polled_by_main: the caller checks the deadline itself
// (check_collective_deadline in its wait loop); otherwise the watchdog thread does (opaque sections).
uint64_t begin_host_collective(Channel channel, const std::string& what, bool polled_by_main);
void end_host_collective(Channel channel, uint64_t seq);
// In a wait loop of the main thread: ends the job if the watchdog asked for it or the collective begun at
// `started` (steady_clock seconds, see watchdog_now) has passed its deadline.
void check_collective_deadline(Channel channel, uint64_t seq, double started);
double watchdog_now();
// Waiting loops that see more than this many seconds between two of their checks conclude that the process
// was not running (stopped, or the machine suspended) and do not count the gap against the deadline.
constexpr double kNotRunningGap = 1.0;

// A collective section the main thread cannot poll (e.g. a collective checkpoint write): RAII.
class CollectiveSection {
 public:
  explicit CollectiveSection(const std::string& what);
  ~CollectiveSection();
  CollectiveSection(const CollectiveSection&) = delete;
  CollectiveSection& operator=(const CollectiveSection&) = delete;

 private:
  uint64_t seq_;
};

// Device collectives: the main thread issues them (begin_device_collective returns the sequence number);
// a probe reports when the device reached one (arrived) and finished it (completed).
uint64_t begin_device_collective(const std::string& what);
void device_collective_arrived(uint64_t seq);
void device_collective_completed(uint64_t seq);

// Probes run on the watchdog thread at every poll (about 10 per second); abort hooks run once when the
// watchdog fires, on whichever thread fires. Both are removed by id. A probe that calls CUDA selects its rank's
// device first (cudaSetDevice): the current device is per thread, and this one's would be device 0.
int add_watchdog_probe(std::function<void()> probe);
int add_abort_hook(std::function<void()> hook);
void remove_watchdog_callback(int id);

// From a probe: the device reported an asynchronous error (named in `what`). Reports, runs the abort hooks
// and asks the main thread to abort the job.
void report_async_collective_error(const std::string& what);

// Whether the watchdog has fired (the job is being aborted).
bool watchdog_fired();
// Main thread: if the watchdog fired, end the job now (MPI_Abort); otherwise return.
void abort_if_watchdog_fired();

}  // namespace cnn
