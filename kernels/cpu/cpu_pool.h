// The worker threads of the fast CPU backend's own kernels (batch norm, Winograd, element-wise ops).
//
// Under OMP_WAIT_POLICY=passive, the policy shared machines and `make bench` use so that idle threads do not burn
// a core, libgomp puts every worker to sleep at the end of each parallel region, and starting the next one wakes
// them again (a futex wake-up, on a VM an interrupt to a halted virtual CPU): 80-110 us a region. A ResNet-20
// step runs ~155 of them back to back with microseconds between them, so 12% of the step went to waking threads
// (docs/perf.md, sixteenth pass). There the kernels run on this fork-join pool instead, whose idle workers first
// wait actively for about as long as a wake-up costs (yielding the core to any other runnable thread), then
// sleep: the classic two-phase wait, never worse than twice the better of spinning and sleeping, and nearly free
// when the next job comes within microseconds. oneDNN keeps its OpenMP threads, which sleep at once there.
// Under any other policy libgomp's workers spin after a region and would take a core from the pool's, so the
// jobs run as OpenMP regions on their team, as before.
#pragma once

#include <type_traits>

namespace cnn {

using PoolTask = void (*)(void* context, int id, int threads);

// Runs task(context, id, threads) for each id in [0, threads) and returns when all have returned; the calling
// thread runs id 0. When the pool cannot take the job (threads <= 1, a call from inside a task or an OpenMP
// region, another thread's job in progress, no thread could be started) the caller runs all ids itself in order, so a task that splits
// its work by (id, threads) computes the same either way. Tasks must not wait for each other (no barriers). An
// exception thrown by a task is rethrown here once all ids have finished (the first one, if several threw).
void pool_run_task(int threads, PoolTask task, void* context);

template <class F>
void pool_run(int threads, F&& body) {
  using Body = std::remove_reference_t<F>;
  pool_run_task(
      threads, [](void* c, int id, int n) { (*static_cast<Body*>(c))(id, n); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// Whether libgomp's workers sleep as soon as a region ends (OMP_WAIT_POLICY=passive), and the jobs therefore run
// on the pool; otherwise libgomp's workers spin after a region (by default up to 300,000 iterations) and would take
// a core from the pool's, so the jobs run as OpenMP regions on their team.
bool omp_workers_sleep();

// How long (microseconds) an idle pool worker, and a caller waiting for its workers, wait actively before
// sleeping: CNNTRAIN_CPU_SPIN_US (docs/environment.md), default 100; 0 sleeps at once, as libgomp's workers do
// under OMP_WAIT_POLICY=passive. Read once.
long pool_spin_us();

}  // namespace cnn
