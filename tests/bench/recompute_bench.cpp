// The throughput cost of activation recomputation (`make bench-recompute`; docs/perf.md): per model, training
// steps (train_step: forward, loss, backward, SGD) with and without --train.recompute true, taken in strict
// alternation in one process so that both see the same machine load, and the activation bytes per sample of
// each. Reported: the median step time of each and the median of the per-pair ratios.
//
//   build/bench/recompute_bench [--models resnet20:128:32,resnet50:16:224] [--pairs 10] [--threads 2]
//   (model:batch:side, square RGB images, 10 classes for side 32, 1000 otherwise)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/rng.h"
#include "src/model/zoo.h"
#include "src/train/step.h"
#include "tests/bench/bench_util.h"

namespace cnn::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Rig {
  std::unique_ptr<Net> net;
  std::unique_ptr<Optimizer> opt;
  StepBuffers buf;
};

Rig make_rig(Backend& be, const std::string& model, int batch, int side, bool recompute) {
  const int classes = side == 32 ? 10 : 1000;
  Rig r;
  r.net = std::make_unique<Net>(be, Dims{side, side, 3}, classes);
  build_model(model, *r.net);
  r.net->set_recompute(recompute ? "true" : "false");
  r.net->build(batch, 1);
  r.opt = make_optimizer(OptimizerConfig{}, be, *r.net);
  r.buf = alloc_step_buffers(be, *r.net);
  CounterRng rng(7, 0);
  std::vector<float> x(static_cast<size_t>(batch) * side * side * 3);
  for (float& v : x) v = rng.uniform() * 2 - 1;
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % classes;
  be.upload(r.buf.x, x.data(), sizeof(float) * x.size());
  be.upload(r.buf.labels, y.data(), sizeof(int32_t) * y.size());
  return r;
}

double step_seconds(Backend& be, Rig& r, int batch) {
  StepStats st;
  const auto t0 = Clock::now();
  train_step(be, *r.net, *r.opt, nullptr, r.buf, batch, batch, 0.f, 0.01, st);
  be.synchronize();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Item {
  std::string model;
  int batch = 0, side = 0;
};

// MODEL:BATCH:SIDE; anything else is a usage error naming the item (exit 2).
Item parse_item(const std::string& spec) {
  const auto a = spec.find(':'), b = a == std::string::npos ? a : spec.find(':', a + 1);
  if (b == std::string::npos) {
    std::fprintf(stderr, "recompute_bench: --models: bad item '%s': expected MODEL:BATCH:SIDE\n", spec.c_str());
    std::exit(2);
  }
  Item it{spec.substr(0, a), int_option("--models " + spec + ": BATCH", spec.substr(a + 1, b - a - 1), 1),
          int_option("--models " + spec + ": SIDE", spec.substr(b + 1), 1)};
  if (!is_model(it.model)) {
    std::fprintf(stderr, "recompute_bench: --models: unknown model '%s'\n", it.model.c_str());
    std::exit(2);
  }
  return it;
}

void bench(const Item& item, int pairs, int threads) {
  const std::string& model = item.model;
  const int batch = item.batch, side = item.side;
  auto be = make_cpu_backend(threads);
  Rig rigs[2] = {make_rig(*be, model, batch, side, false), make_rig(*be, model, batch, side, true)};
  for (Rig& r : rigs) step_seconds(*be, r, batch);  // warm-up: oneDNN primitives, first touch
  std::vector<double> t[2], ratio;
  for (int p = 0; p < pairs; ++p) {
    // Alternate which goes first, so that neither always follows the other's cache state.
    const int first = p % 2;
    double s[2];
    s[first] = step_seconds(*be, rigs[first], batch);
    s[1 - first] = step_seconds(*be, rigs[1 - first], batch);
    t[0].push_back(s[0]);
    t[1].push_back(s[1]);
    ratio.push_back(s[1] / s[0]);
  }
  std::printf("%-9s batch %4d %3dx%-3d | without: %7.1f img/s, %7.2f MB/sample | recompute: %7.1f img/s, %7.2f "
              "MB/sample | step time x%.3f (median of %d pairs; load %s)\n",
              model.c_str(), batch, side, side, batch / median(t[0]),
              rigs[0].net->activation_bytes_per_sample() / 1e6, batch / median(t[1]),
              rigs[1].net->activation_bytes_per_sample() / 1e6, median(ratio), pairs, load_average().c_str());
  std::fflush(stdout);
  for (Rig& r : rigs) free_step_buffers(*be, r.buf);
}

}  // namespace
}  // namespace cnn::bench

int main(int argc, char** argv) {
  std::string models = "resnet20:128:32,resnet50:16:224";
  int pairs = 10, threads = 2;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "recompute_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--models")) models = argv[i + 1];
    else if (!std::strcmp(argv[i], "--pairs")) pairs = cnn::bench::int_option(argv[i], argv[i + 1], 1);
    else if (!std::strcmp(argv[i], "--threads")) threads = cnn::bench::int_option(argv[i], argv[i + 1], 1);
    else {
      std::fprintf(stderr, "unknown option %s (--models M:BATCH:SIDE,..., --pairs N, --threads T)\n", argv[i]);
      return 2;
    }
  }
  std::vector<cnn::bench::Item> items;  // all checked before the first is measured
  for (const std::string& m : cnn::bench::list_option("--models", models)) items.push_back(cnn::bench::parse_item(m));
  for (const auto& item : items) cnn::bench::bench(item, pairs, threads);
  return 0;
}
