// The fast CPU backend's fork-join pool (kernels/cpu/cpu_pool.h): every id runs exactly once per job on its own
// thread, on both paths (the pool under OMP_WAIT_POLICY=passive, OpenMP regions otherwise), through the workers'
// and the caller's sleeping waits, with exceptions, nested calls and two callers at once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/cpu_pool.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

struct PoolPath : ::testing::TestWithParam<const char*> {
  // The path is chosen at each job from OMP_WAIT_POLICY (cpu_pool.cpp, omp_workers_sleep).
  test::ScopedEnv policy{"OMP_WAIT_POLICY", GetParam()};
};

// Runs a job of `threads` ids and checks each ran once, ids on distinct threads, id 0 on the caller.
void check_job(int threads) {
  std::vector<std::atomic<int>> runs(threads);
  std::vector<std::thread::id> who(threads);
  std::atomic<int> wrong_count{0};
  pool_run(threads, [&](int id, int n) {
    if (n != threads) wrong_count.fetch_add(1);
    runs[id].fetch_add(1);
    who[id] = std::this_thread::get_id();
  });
  EXPECT_EQ(wrong_count.load(), 0);
  for (int id = 0; id < threads; ++id) EXPECT_EQ(runs[id].load(), 1) << "id " << id << " of " << threads;
  EXPECT_EQ(who[0], std::this_thread::get_id());
  EXPECT_EQ(std::set<std::thread::id>(who.begin(), who.end()).size(), static_cast<size_t>(threads));
}

TEST_P(PoolPath, EveryIdRunsOnceOnItsOwnThread) {
  // Thread counts up and down: workers beyond a job's count stay out of it.
  for (int round = 0; round < 300; ++round) check_job(1 + (round * 7) % 5);
}

TEST_P(PoolPath, MoreThreadsThanTheJobWordCounts) {
  check_job(300);  // the pool's word counts up to 255: OpenMP's team takes such jobs on both paths
}

TEST_P(PoolPath, WorkersAndCallerThatFellAsleepWakeUp) {
  // Longer than the spin (100 us by default): the idle worker sleeps between jobs, the caller while a worker
  // is still busy.
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    check_job(3);
    std::atomic<int> done{0};
    pool_run(2, [&](int id, int) {
      if (id == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      done.fetch_add(1);
    });
    EXPECT_EQ(done.load(), 2);
  }
}

TEST_P(PoolPath, ExceptionsReachTheCallerAfterEveryIdFinished) {
  for (int thrower : {0, 1, 2}) {
    std::atomic<int> finished{0};
    EXPECT_THROW(pool_run(3,
                          [&](int id, int) {
                            if (id == thrower) throw std::runtime_error("task failed");
                            std::this_thread::sleep_for(std::chrono::milliseconds(1));
                            finished.fetch_add(1);
                          }),
                 std::runtime_error)
        << "thrower " << thrower;
    EXPECT_EQ(finished.load(), 2);
    check_job(3);  // still usable
  }
}

TEST_P(PoolPath, NestedJobsRunOnTheirCaller) {
  std::atomic<int> bad{0}, inner_runs{0};
  pool_run(2, [&](int, int) {
    const std::thread::id me = std::this_thread::get_id();
    pool_run(3, [&](int, int) {
      if (std::this_thread::get_id() != me) bad.fetch_add(1);
      inner_runs.fetch_add(1);
    });
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(inner_runs.load(), 6);
}

TEST_P(PoolPath, TwoCallersAtOnce) {
  // One gets the pool, the other runs its ids itself while it is busy; both jobs complete.
  std::vector<long long> sums(2, 0);
  auto caller = [&](int k) {
    for (int round = 0; round < 200; ++round) {
      std::vector<long long> part(4, 0);
      pool_run(4, [&](int id, int n) {
        for (long long i = 1000 * id / n; i < 1000 * (id + 1) / n; ++i) part[id] += i;
      });
      for (long long v : part) sums[k] += v;
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  EXPECT_EQ(sums[0], 200LL * 499500);
  EXPECT_EQ(sums[1], 200LL * 499500);
}

// The pool path only: a forked child hangs in its first OpenMP region where the parent had a team (libgomp).
TEST(PoolFork, AForkedChildStartsItsOwnWorkers) {
  const test::ScopedEnv passive("OMP_WAIT_POLICY", "passive");
  check_job(3);  // the parent's workers exist
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(10);  // a child waiting for workers it does not have dies of SIGALRM instead of hanging the test
    std::atomic<int> runs{0};
    pool_run(3, [&](int, int) { runs.fetch_add(1); });
    _exit(runs.load() == 3 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST_P(PoolPath, ParallelForCoversEachIndexOnce) {
  for (long long count : {1LL, 2LL, 3LL, 64LL, 1001LL}) {
    std::vector<std::atomic<int>> hits(count);
    parallel_for(4, size_t{1} << 30, count, [&](long long i) { hits[i].fetch_add(1); });
    for (long long i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << i << " of " << count;
  }
}

// The kernels on the pool give the bits they give on OpenMP's team: batch norm with residual and ReLU, forward
// and backward, and a 16-channel Winograd convolution (cnntrain's own kernels), three threads.
std::vector<std::vector<float>> kernel_outputs() {
  const int n = 16, h = 16, w = 16, c = 16, rows = n * h * w;  // 64 K elements: split over the threads
  const size_t nx = static_cast<size_t>(rows) * c;
  const auto x = test::random_vec(nx, 1), res = test::random_vec(nx, 2), dy = test::random_vec(nx, 3);
  const auto wt = test::random_vec(static_cast<size_t>(c) * 9 * c, 4), gamma = test::random_vec(c, 5, 0.5f, 1.5f);
  const std::vector<float> beta(c, 0.1f);
  auto be = make_cpu_backend(3, CpuKernels::kFast);
  std::vector<float> y(nx), dx(nx), dres(nx), conv(nx), mean(c), invstd(c), rmean(c, 0.f), rvar(c, 1.f);
  std::vector<float> dgamma(c, 0.f), dbeta(c, 0.f);
  std::vector<uint32_t> mask(nx / 32 + 1);
  be->batchnorm_forward_train(DType::kF32, rows, c, x.data(), res.data(), gamma.data(), beta.data(), 1e-5f, 0.1f,
                              true, y.data(), mask.data(), mean.data(), invstd.data(), rmean.data(), rvar.data());
  be->batchnorm_backward(DType::kF32, rows, c, x.data(), mask.data(), dy.data(), gamma.data(), mean.data(),
                         invstd.data(), dx.data(), dres.data(), dgamma.data(), dbeta.data());
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = c, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
  be->conv2d_forward(DType::kF32, d, y.data(), wt.data(), nullptr, conv.data());
  return {y, dx, dres, conv, mean, invstd, dgamma, dbeta};
}

TEST(PoolKernels, SameBitsAsOnOpenMP) {
  std::vector<std::vector<float>> on_pool, on_openmp;
  {
    const test::ScopedEnv passive("OMP_WAIT_POLICY", "passive");
    on_pool = kernel_outputs();
  }
  {
    const test::ScopedEnv active("OMP_WAIT_POLICY", "active");
    on_openmp = kernel_outputs();
  }
  ASSERT_EQ(on_pool.size(), on_openmp.size());
  for (size_t i = 0; i < on_pool.size(); ++i)
    EXPECT_EQ(0, std::memcmp(on_pool[i].data(), on_openmp[i].data(), on_pool[i].size() * sizeof(float)))
        << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(Paths, PoolPath, ::testing::Values("passive", "active"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace cnn
