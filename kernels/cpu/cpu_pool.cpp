// The fork-join pool of kernels/cpu/cpu_pool.h, used under OMP_WAIT_POLICY=passive (otherwise jobs are OpenMP
// regions, see omp_workers_sleep). One job at a time: the caller publishes (task, context), then a
// job word that packs a job counter with the thread count, and runs id 0; worker w (id w + 1) takes the job when
// the word changes and its id is below the count. Waits spin (pause, then sched_yield so that a descheduled
// thread of this or another program gets the core) for pool_spin_us(), then sleep on a futex; whoever changes a
// word a sleeper waits on wakes it. The pool is never destroyed: its workers sleep until the process exits.
#include "kernels/cpu/cpu_pool.h"

#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

namespace cnn {

namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are plain 32-bit integers");

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or pool_spin_us() have passed; returns done().
template <class Done>
bool spin_until(Done done) {
  const long us = pool_spin_us();
  if (us <= 0) return done();
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int k = 0; k < 32; ++k) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= end) return done();
    sched_yield();
  }
}

constexpr uint32_t kCountBits = 8;  // the job word: (job counter << 8) | thread count
constexpr int kMaxThreads = (1 << kCountBits) - 1;

struct Pool {
  std::mutex busy;                      // held by the caller for the whole job
  std::atomic<uint32_t> job{0};         // futex word the idle workers wait on
  std::atomic<uint32_t> pending{0};     // workers of the current job still running; the caller waits on it
  std::atomic<int> sleepers{0};         // workers asleep (or about to be) on `job`
  std::atomic<bool> caller_asleep{false};
  PoolTask task = nullptr;  // the current job, written before `job` changes
  void* context = nullptr;
  int workers = 0;  // started, ids 1 .. workers
  std::mutex error_mutex;
  std::exception_ptr error;
};

// Never destroyed: a worker may still be waking up when the process exits. A child of fork() has none of the
// parent's workers: it starts a pool of its own.
Pool* g_pool = nullptr;
Pool& pool() {
  static const bool once = [] {
    g_pool = new Pool;
    pthread_atfork(nullptr, nullptr, [] { g_pool = new Pool; });
    return true;
  }();
  (void)once;
  return *g_pool;
}

thread_local bool t_in_task = false;

void note_error(Pool& p) {
  std::lock_guard<std::mutex> lock(p.error_mutex);
  if (!p.error) p.error = std::current_exception();
}

void worker_loop(Pool* p, int id, uint32_t seen) {
  t_in_task = true;  // a task's own pool_run_task calls run on this thread
  for (;;) {
    if (!spin_until([&] { return p->job.load(std::memory_order_acquire) != seen; })) {
      p->sleepers.fetch_add(1);
      while (p->job.load() == seen) futex_wait(p->job, seen);
      p->sleepers.fetch_sub(1);
    }
    seen = p->job.load(std::memory_order_acquire);
    const int threads = static_cast<int>(seen & kMaxThreads);
    if (id >= threads) continue;  // not in this job (the caller does not wait for it)
    try {
      p->task(p->context, id, threads);
    } catch (...) {
      note_error(*p);
    }
    if (p->pending.fetch_sub(1) == 1 && p->caller_asleep.load()) futex_wake_all(p->pending);
  }
}

// Starts workers up to id threads - 1; false if none could be started for some id (the caller then runs alone).
bool start_workers(Pool& p, int threads) {
  if (p.workers >= threads - 1) return true;
  // The workers take no asynchronous signals (the program routes its stop signals to one thread,
  // src/train/signals.cpp); faults stay deliverable.
  sigset_t all, previous;
  sigfillset(&all);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&all, s);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  try {
    for (; p.workers < threads - 1; ++p.workers)
      std::thread(worker_loop, &p, p.workers + 1, p.job.load()).detach();
  } catch (const std::system_error&) {
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return p.workers >= threads - 1;
}

void run_alone(int threads, PoolTask task, void* context) {
  for (int id = 0; id < threads; ++id) task(context, id, threads);
}

void run_openmp(int threads, PoolTask task, void* context) {
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked for (OMP_THREAD_LIMIT, OMP_DYNAMIC): its threads share the ids.
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int id = t; id < threads; id += nt) try {
        task(context, id, threads);
      } catch (...) {
#pragma omp critical(cnn_pool_error)
        if (!error) error = std::current_exception();
      }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

// Read at each job (well under a microsecond), so that the tests can run both paths in one process.
bool omp_workers_sleep() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy && strcasecmp(policy, "passive") == 0;
}

long pool_spin_us() {
  static const long us = [] {
    const char* s = std::getenv("CNNTRAIN_CPU_SPIN_US");
    if (!s || !*s) return 100L;
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (*end == '\0' && v >= 0 && v <= 1000000) return v;
    std::fprintf(stderr,
                 "cnntrain: CNNTRAIN_CPU_SPIN_US=%s is not a whole number of microseconds from 0 to 1000000; "
                 "using 100 (docs/environment.md)\n",
                 s);
    return 100L;
  }();
  return us;
}

void pool_run_task(int threads, PoolTask task, void* context) {
  if (threads <= 1) return run_alone(threads < 1 ? 1 : threads, task, context);
  if (t_in_task || omp_in_parallel()) return run_alone(threads, task, context);
  // More threads than the job word can count (255) go to OpenMP's team too.
  if (!omp_workers_sleep() || threads > kMaxThreads) return run_openmp(threads, task, context);
  Pool& p = pool();
  std::unique_lock<std::mutex> lock(p.busy, std::try_to_lock);
  if (!lock.owns_lock() || !start_workers(p, threads)) return run_alone(threads, task, context);
  p.task = task;
  p.context = context;
  p.pending.store(threads - 1);
  const uint32_t word = ((p.job.load() >> kCountBits) + 1) << kCountBits | static_cast<uint32_t>(threads);
  p.job.store(word);
  if (p.sleepers.load() > 0) futex_wake_all(p.job);
  std::exception_ptr mine;
  t_in_task = true;
  try {
    task(context, 0, threads);
  } catch (...) {
    mine = std::current_exception();
  }
  t_in_task = false;
  if (!spin_until([&] { return p.pending.load(std::memory_order_acquire) == 0; })) {
    p.caller_asleep.store(true);
    for (uint32_t left; (left = p.pending.load()) != 0;) futex_wait(p.pending, left);
    p.caller_asleep.store(false);
  }
  std::exception_ptr theirs;
  {
    std::lock_guard<std::mutex> guard(p.error_mutex);
    theirs = p.error;
    p.error = nullptr;
  }
  if (mine) std::rethrow_exception(mine);
  if (theirs) std::rethrow_exception(theirs);
}

}  // namespace cnn
