// Exposed gradient communication of data-parallel CPU training (`make bench-comm`, under mpirun -np 2): for
// each model, bucket size and --comm.overlap setting, the share of a training step the host spends waiting in
// GradSync::finish() for the bucket allreduces, i.e. the communication backward did not hide. Settings are
// measured in rotation within each repetition (same machine state); the table gives medians over repetitions.
//
//   mpirun -np 2 build/bench/comm_bench [--models fmnist_resnet,resnet20] [--batch 128] [--steps 20] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/rng.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/model/zoo.h"
#include "src/train/step.h"
#include "tests/bench/bench_util.h"

namespace cnn::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Setting {
  double bucket_mb;
  bool overlap;
};

struct Result {
  std::vector<double> step_ms, exposed_pct;
};

struct Rig {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  std::unique_ptr<Net> net;
  std::unique_ptr<Optimizer> opt;
  StepBuffers buf;
  int local;
  int64_t global;

  Rig(const std::string& model, int global_batch) : local(global_batch / world_size()), global(global_batch) {
    const Dims in = model == "resnet20" ? Dims{32, 32, 3} : Dims{28, 28, 1};
    net = std::make_unique<Net>(*be, in, 10);
    build_model(model, *net);
    net->build(local, 42);
    opt = make_optimizer(OptimizerConfig{}, *be, *net);
    buf = alloc_step_buffers(*be, *net);
    CounterRng rng(7, static_cast<uint64_t>(world_rank()) + 1);
    std::vector<float> x(in.size() * local);
    for (auto& v : x) v = 2 * rng.uniform() - 1;
    std::vector<int32_t> y(local);
    for (auto& v : y) v = static_cast<int32_t>(rng.below(10));
    be->upload(buf.x, x.data(), sizeof(float) * x.size());
    be->upload(buf.labels, y.data(), sizeof(int32_t) * y.size());
  }
  ~Rig() { free_step_buffers(*be, buf); }

  // Milliseconds of one allreduce of the whole gradient with both ranks ready (after a barrier): the cost of
  // the communication itself, without the waiting for a slower rank that the exposed share also contains.
  double allreduce_alone_ms(Collectives& comm, int reps) {
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      barrier();
      const auto t0 = Clock::now();
      comm.allreduce_sum(net->grads(), net->num_params(), "gradient allreduce alone");
      std::vector<double> all(static_cast<size_t>(world_size()), 0.0);
      all[world_rank()] = std::chrono::duration<double>(Clock::now() - t0).count() * 1000;
      allreduce_sum(all.data(), all.size());
      ms.push_back(*std::max_element(all.begin(), all.end()));
    }
    return median(ms);
  }

  // Milliseconds of one GradSync of the whole gradient (25 MiB buckets, all launched by finish()) with both
  // ranks ready, the gradient travelling as `wire` (--comm.grad_dtype): the 16-bit wire's conversions
  // against its halved bytes.
  double grad_sync_alone_ms(Collectives& comm, GradWire wire, int reps) {
    GradSyncOptions o;
    o.wire = wire;
    auto sync = comm.make_grad_sync(net->grads(), net->num_params(), o);
    const std::vector<float> g(net->grads(), net->grads() + net->num_params());
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      std::copy(g.begin(), g.end(), net->grads());  // the same values every time (sums would grow)
      barrier();
      const auto t0 = Clock::now();
      sync->finish();
      std::vector<double> all(static_cast<size_t>(world_size()), 0.0);
      all[world_rank()] = std::chrono::duration<double>(Clock::now() - t0).count() * 1000;
      allreduce_sum(all.data(), all.size());
      ms.push_back(*std::max_element(all.begin(), all.end()));
    }
    return median(ms);
  }

  // Milliseconds per step and the exposed share (%), both the maximum over ranks (the slowest rank sets the
  // pace of synchronous data parallelism).
  std::pair<double, double> run(Collectives& comm, const Setting& s, int steps) {
    GradSyncOptions o;
    o.bucket_bytes = static_cast<size_t>(s.bucket_mb * 1048576.0);
    o.overlap = s.overlap;
    auto sync = comm.make_grad_sync(net->grads(), net->num_params(), o);
    StepStats st;
    train_step(*be, *net, *opt, sync.get(), buf, local, global, 0.f, 0.01, st);  // warm-up
    barrier();
    st = StepStats{};
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) train_step(*be, *net, *opt, sync.get(), buf, local, global, 0.f, 0.01, st);
    const double v[2] = {std::chrono::duration<double>(Clock::now() - t0).count(), st.comm_s};
    std::vector<double> all(2 * static_cast<size_t>(world_size()), 0.0);
    all[2 * world_rank()] = v[0];
    all[2 * world_rank() + 1] = 100.0 * v[1] / v[0];
    allreduce_sum(all.data(), all.size());
    double ms = 0, pct = 0;
    for (int r = 0; r < world_size(); ++r) {
      ms = std::max(ms, all[2 * r] * 1000.0 / steps);
      pct = std::max(pct, all[2 * r + 1]);
    }
    return {ms, pct};
  }
};


int main_bench(int argc, char** argv) {
  std::string models = "fmnist_resnet,resnet20";
  int batch = 128, steps = 20, reps = 5;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i], v = i + 1 < argc ? argv[i + 1] : "";
    if (k == "--models") models = v;
    else if (k == "--batch") batch = int_option(k, v, 1);
    else if (k == "--steps") steps = int_option(k, v, 1);
    else if (k == "--reps") reps = int_option(k, v, 1);
    else {
      if (world_rank() == 0)
        std::fprintf(stderr, "comm_bench: unknown option %s (--models a,b --batch N --steps N --reps N)\n", k.c_str());
      return 2;
    }
  }
  for (const auto& model : list_option("--models", models))
    if (!is_model(model)) {
      if (world_rank() == 0) std::fprintf(stderr, "comm_bench: --models: unknown model '%s'\n", model.c_str());
      return 2;
    }
  const std::vector<Setting> settings = {{25, true}, {25, false}, {0.25, true}, {0.25, false}};
  auto comm = make_mpi_collectives();
  const bool root = world_rank() == 0;
  if (root)
    std::printf("comm_bench: %d ranks, cpu backend 1 thread/rank, global batch %d, %d steps x %d reps; load average "
                "at start %s\n", world_size(), batch, steps, reps, load_average().c_str());
  for (const auto& model : split_list(models)) {
    Rig rig(model, batch);
    std::vector<Result> res(settings.size());
    for (int r = 0; r < reps; ++r)
      for (size_t s = 0; s < settings.size(); ++s) {
        const auto [ms, pct] = rig.run(*comm, settings[s], steps);
        res[s].step_ms.push_back(ms);
        res[s].exposed_pct.push_back(pct);
      }
    const double alone = rig.allreduce_alone_ms(*comm, 5 * reps);
    double wire_ms[3];
    const GradWire wires[3] = {GradWire::kF32, GradWire::kBF16, GradWire::kF16};
    for (int w = 0; w < 3; ++w) wire_ms[w] = rig.grad_sync_alone_ms(*comm, wires[w], 5 * reps);
    if (!root) continue;
    std::printf("\n%s: %zu parameters (%.2f MB of gradient); one allreduce of it with both ranks ready: %.2f ms "
                "(median of %d)\n", model.c_str(), rig.net->num_params(), rig.net->num_params() * 4 / 1e6, alone,
                5 * reps);
    std::printf("one GradSync of it (25 MiB buckets) by --comm.grad_dtype, both ranks ready, conversions included: "
                "fp32 %.2f ms, bf16 %.2f ms, fp16 %.2f ms (medians of %d)\n", wire_ms[0], wire_ms[1], wire_ms[2],
                5 * reps);
    std::printf("| bucket MiB | buckets | overlap | step ms (median) | exposed comm %% of step (median) | "
                "min-max %% |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < settings.size(); ++s) {
      const size_t per = std::max<size_t>(1, static_cast<size_t>(settings[s].bucket_mb * 1048576.0) / 4);
      const size_t buckets = (rig.net->num_params() + per - 1) / per;
      const auto& e = res[s].exposed_pct;
      std::printf("| %g | %zu | %s | %.1f | %.1f | %.1f-%.1f |\n", settings[s].bucket_mb, buckets,
                  settings[s].overlap ? "on" : "off", median(res[s].step_ms), median(e),
                  *std::min_element(e.begin(), e.end()), *std::max_element(e.begin(), e.end()));
    }
  }
  if (root) std::printf("\nload average at end %s\n", load_average().c_str());
  return 0;
}

}  // namespace
}  // namespace cnn::bench

int main(int argc, char** argv) {
  cnn::comm_init(&argc, &argv);
  const int rc = cnn::bench::main_bench(argc, argv);
  cnn::comm_finalize();
  return rc;
}
