// Training-step benchmark of the CPU backend (`make bench-train`, part of `make bench`): images/s of each
// benchmark model at its batch size, measured alternately with PyTorch 2 from PyPI (tests/bench/torch_bench.py
// in build/pyvenv, same architecture and batch, at its best: the fastest of eager contiguous, eager
// channels_last and torch.compile, and of the thread counts) and Debian's PyTorch 1.13 (a second column), so
// all see the same machine load; the ratio over PyTorch 2 is the median of the per-repetition ratios and is
// checked against the model's target. --import FILE.onnx adds an imported model, with and without the fusion
// rewrites (src/model/graph_rewrite.h), to compare with the zoo's equivalent (resnet18). Also:
// the machine's measured FMA peak, achieved GFLOP/s and fraction of peak, heap allocations per step after
// warm-up, a per-layer forward/backward breakdown, a per-op breakdown (every Backend call timed, comparable to
// torch.autograd.profiler's table: torch_bench.py --profile), the 3x3 >=64-channel convolutions op by op, and
// batch norm + ReLU op by op against oneDNN's batch normalization primitive.
//
//   build/bench/train_bench [--models resnet20,lenet5,resnet50,mobilenet_v2] [--batch N] [--threads 2]
//                           [--torch-threads 1,2] [--reps 5] [--seconds 2]
//                           [--torch tests/bench/torch_bench.py | --torch none]
//                           [--torch-python build/pyvenv/bin/python] [--torch-old-python /usr/bin/python3|none]
//                           [--import FILE.onnx] [--import-input 64x64x3]
//                           [--no-layers] [--no-ops] [--no-convs] [--no-bn] [--ops-cpu-clock]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "io/loader.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/model/graph_rewrite.h"
#include "src/model/net.h"
#include "src/model/onnx/onnx_import.h"
#include "src/model/zoo.h"
#include "src/train/optimizer.h"
#include "src/train/step.h"
#include "tests/bench/alloc_count.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/bn_bench.h"
#include "tests/bench/conv_bench.h"
#include "tests/bench/op_profile.h"
#include "tests/bench/peak.h"
#include "tests/bench/torch_peer.h"

namespace cnn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


// ResNet-20's convolution stack without BN or shortcuts (buildable from the layers that exist today): 3x3
// conv + ReLU with 16/32/64 channels at 32x32/16x16/8x8, stride-2 convs opening stages 2 and 3, an 8x8 max
// pool and a linear classifier. torch_bench.py's resnet20_plain is the same network.
void resnet20_plain(Net& net) {
  int i = 0;
  for (int stage = 0; stage < 3; ++stage)
    for (int j = 0; j < (stage == 0 ? 7 : 6); ++j) {
      ++i;
      const int stride = stage > 0 && j == 0 ? 2 : 1;
      net.add(make_conv2d("conv" + std::to_string(i), 16 << stage, {3, stride, 1, true}));
      net.add(make_relu("relu" + std::to_string(i)));
    }
  net.add(make_maxpool("pool", 8, 8));
  net.add(make_flatten("flatten"));
  net.add(make_linear("fc", net.num_classes()));
}

struct ModelSpec {
  std::string name;
  Dims input;
  int batch = 128;       // the batch the target is stated for
  double target = 0;     // images/s ratio over PyTorch to reach; 0: none
  std::function<void(Net&)> build;  // null: from the model zoo (or `onnx`)
  std::string onnx;  // an ONNX file to import instead
  bool fuse = true;  // run the fusion rewrites on the imported graph
  bool peer = true;  // PyTorch has the model (torch_bench.py)
};

// The benchmark models and their targets (cnntrain images/s over PyTorch's best, same batch). Zoo models that
// do not exist in this build are skipped with a note.
std::vector<ModelSpec> known_models() {
  return {{"resnet20", {32, 32, 3}, 128, 1.6, nullptr, "", true, true},
          {"lenet5", {28, 28, 1}, 256, 2.5, nullptr, "", true, true},
          {"resnet50", {224, 224, 3}, 32, 2.0, nullptr, "", true, true},
          {"mobilenet_v2", {224, 224, 3}, 32, 1.3, nullptr, "", true, true},
          {"fmnist_cnn", {28, 28, 1}, 128, 0, nullptr, "", true, true},
          {"resnet18", {64, 64, 3}, 32, 0, nullptr, "", true, true},  // the zoo's side of the --import comparison
          {"resnet20_plain", {32, 32, 3}, 128, 0, resnet20_plain, "", true, true}};
}

// One model on one backend, with the buffers and optimizer of a training step on synthetic data.
struct Rig {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> be;  // cpu, or a profiling wrapper around it
  std::unique_ptr<Net> net;
  std::unique_ptr<Optimizer> opt;
  StepBuffers buf;
  int batch;

  Rig(const ModelSpec& m, int threads, int batch, OpProfile* prof = nullptr) : batch(batch) {
    cpu = make_cpu_backend(threads, CpuKernels::kFast);
    be = prof ? prof->wrap(*cpu) : std::move(cpu);
    net = std::make_unique<Net>(*be, m.input, 10);
    if (m.build) {
      m.build(*net);
    } else if (!m.onnx.empty()) {
      import_onnx(read_onnx(m.onnx), *net, BnOptions{});  // fresh weights: throughput does not depend on them
      if (m.fuse) fuse_graph(*net);
    } else {
      build_model(m.name, *net);
    }
    net->build(batch, 42);
    OptimizerConfig oc;
    oc.weight_decay = 5e-4;
    opt = make_optimizer(oc, *be, *net);
    buf = alloc_step_buffers(*be, *net);
    CounterRng rng(7, 1);
    std::vector<float> x(m.input.size() * batch);
    for (auto& v : x) v = 2 * rng.uniform() - 1;
    std::vector<int32_t> y(batch);
    for (auto& v : y) v = static_cast<int32_t>(rng.below(10));
    be->upload(buf.x, x.data(), sizeof(float) * x.size());
    be->upload(buf.labels, y.data(), sizeof(int32_t) * y.size());
  }
  ~Rig() {
    free_step_buffers(*be, buf);
    opt.reset();
    net.reset();
    be.reset();
  }
  void steps(int k) {
    StepStats st;
    for (int i = 0; i < k; ++i) train_step(*be, *net, *opt, nullptr, buf, batch, batch, 0.f, 0.01, st);
    be->synchronize();
  }
  // Training FLOPs per image: forward, backward-weights, and backward-data except for the first layer.
  double train_flops() const {
    double f = 0;
    const auto& ls = net->layers();
    for (size_t i = 0; i < ls.size(); ++i) f += ls[i]->flops_per_sample() * (i == 0 ? 2 : 3);
    return f;
  }
};

struct LayerTime {
  std::string name, what;
  double fwd_s = 0, bwd_s = 0, fwd_flops = 0, bwd_flops = 0;
};

// Runs the layers one at a time (the same calls Net::forward/backward make) and times each.
std::vector<LayerTime> breakdown(Rig& r, const ModelSpec& m, int reps) {
  Backend& be = *r.be;
  const auto& ls = r.net->layers();
  const int n = r.batch;
  std::vector<Dims> out;
  Dims d = m.input;
  size_t max_act = d.size();
  for (const auto& l : ls) {
    d = l->setup(d);  // setup is idempotent: it returns the shape fixed by Net::build
    out.push_back(d);
    max_act = std::max(max_act, d.size());
  }
  std::vector<float*> act(ls.size(), nullptr);
  std::vector<float*> owned;
  for (size_t i = 0; i < ls.size(); ++i)
    if (!ls[i]->is_view()) owned.push_back(act[i] = static_cast<float*>(be.alloc(sizeof(float) * out[i].size() * n)));
  float* g[2] = {static_cast<float*>(be.alloc(sizeof(float) * max_act * n)),
                 static_cast<float*>(be.alloc(sizeof(float) * max_act * n))};
  std::vector<std::vector<double>> tf(ls.size()), tb(ls.size());
  std::vector<double> t_loss, t_opt, t_data;
  std::vector<uint8_t> raw(m.input.size() * n);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  std::vector<float> host(raw.size()), mean(m.input.c, 73.f), sd(m.input.c, 90.f);
  for (int rep = 0; rep < reps + 1; ++rep) {  // the first repetition warms up
    auto t0 = Clock::now();
    normalize_images(raw.data(), static_cast<size_t>(n) * m.input.h * m.input.w, m.input.c, mean, sd, host.data());
    be.upload(r.buf.x, host.data(), sizeof(float) * host.size());
    be.synchronize();
    if (rep) t_data.push_back(since(t0));
    r.net->zero_grads();
    const float* cur = r.buf.x;
    for (size_t i = 0; i < ls.size(); ++i) {
      if (ls[i]->is_view()) {
        act[i] = const_cast<float*>(cur);
      } else {
        t0 = Clock::now();
        ls[i]->forward(be, cur, act[i], n, true);
        be.synchronize();
        if (rep) tf[i].push_back(since(t0));
      }
      cur = act[i];
    }
    double loss = 0;
    int64_t correct = 0;
    t0 = Clock::now();
    float* dlogits = static_cast<float*>(r.buf.dlogits);  // an fp32 net
    be.softmax_xent(DType::kF32, n, 10, cur, r.buf.labels, 0.f, 1.f / n, dlogits, &loss, &correct);
    be.synchronize();
    if (rep) t_loss.push_back(since(t0));
    const float* dy = dlogits;
    int flip = 0;
    for (size_t i = ls.size(); i-- > 0;) {
      if (ls[i]->is_view()) continue;
      float* dx = i == 0 ? nullptr : g[flip];
      t0 = Clock::now();
      ls[i]->backward(be, i == 0 ? r.buf.x : act[i - 1], act[i], dy, dx, n);
      be.synchronize();
      if (rep) tb[i].push_back(since(t0));
      dy = dx;
      flip ^= 1;
    }
    t0 = Clock::now();
    r.opt->step(0.01);
    be.synchronize();
    if (rep) t_opt.push_back(since(t0));
  }
  std::vector<LayerTime> v;
  v.push_back({"data", "normalise uint8 + upload (loader thread)", median(t_data), 0, 0, 0});
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i]->is_view()) continue;
    const double f = ls[i]->flops_per_sample() * n;
    v.push_back({ls[i]->name(), ls[i]->describe(), median(tf[i]), median(tb[i]), f, i == 0 ? f : 2 * f});
  }
  v.push_back({"loss", "softmax cross-entropy", median(t_loss), 0, 0, 0});
  v.push_back({"optimizer", "SGD momentum, weight decay", median(t_opt), 0, 0, 0});
  for (float* p : owned) be.release(p);
  be.release(g[0]);
  be.release(g[1]);
  return v;
}

struct Result {
  ModelSpec spec;
  int batch = 0, threads = 0;
  double ours = 0, torch = 0, ratio = 0, flops_per_image = 0, allocs_per_step = 0;
  double torch_old = 0, ratio_old = 0;  // Debian's PyTorch 1.13
  TorchPeer::Run torch_setting, torch_old_setting;
};

// Every Backend op of `steps` training steps, timed one by one (the wrapper synchronizes after each op).
void op_table(const ModelSpec& m, int threads, int batch, int steps, double step_s, bool cpu_clock) {
  OpProfile prof(cpu_clock);
  Rig rig(m, threads, batch, &prof);
  rig.steps(2);
  prof.clear();
  rig.steps(steps);
  std::vector<std::pair<std::string, OpProfile::Entry>> rows(prof.entries().begin(), prof.entries().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::printf("\nPer-op breakdown: %s, %d threads, batch %d, %d steps (every Backend call timed, %s; %% of the sum; "
              "the unprofiled step takes %.1f ms)\n", m.name.c_str(), threads, batch, steps,
              cpu_clock ? "CPU time of the calling thread" : "wall time", 1e3 * step_s);
  std::printf("%-26s %10s %12s %7s\n", "op", "calls/step", "ms/step", "%");
  for (const auto& [op, e] : rows)
    std::printf("%-26s %10.1f %12.3f %6.1f%%\n", op.c_str(), static_cast<double>(e.calls) / steps,
                1e3 * e.seconds / steps, 100 * e.seconds / total);
  std::printf("%-26s %10s %12.3f\n", "total", "", 1e3 * total / steps);
}

void print_layers(const std::string& name, int threads, int batch, int reps, const std::vector<LayerTime>& rows) {
  std::printf("\nPer-layer breakdown: %s, %d threads, batch %d (median of %d; GFLOP/s of the layer's forward / "
              "backward)\n", name.c_str(), threads, batch, reps);
  std::printf("%-12s %-34s %9s %9s %9s %9s\n", "layer", "", "fwd ms", "bwd ms", "fwd GF/s", "bwd GF/s");
  double total = 0;
  for (const LayerTime& l : rows) total += l.fwd_s + l.bwd_s;
  for (const LayerTime& l : rows) {
    char gf[2][16] = {"", ""};
    if (l.fwd_flops > 0) std::snprintf(gf[0], 16, "%9.1f", l.fwd_flops / l.fwd_s / 1e9);
    if (l.bwd_flops > 0) std::snprintf(gf[1], 16, "%9.1f", l.bwd_flops / l.bwd_s / 1e9);
    std::printf("%-12s %-34s %9.3f %9.3f %9s %9s\n", l.name.c_str(), l.what.c_str(), 1e3 * l.fwd_s, 1e3 * l.bwd_s,
                gf[0], gf[1]);
  }
  std::printf("%-12s %-34s %9.3f ms per step (layers run one at a time)\n", "total", "", 1e3 * total);
}

// Images/s of `rig` (threads t, batch b) and of PyTorch, alternating, `reps` repetitions of steps that take
// about `seconds`; *steps_out: that step count.
Result measure(Rig& rig, const ModelSpec& spec, int t, int b, double seconds, int reps, TorchPeer& torch,
               TorchPeer& torch_old, const std::string& torch_threads, int* steps_out) {
  rig.steps(1);
  auto t0 = Clock::now();
  rig.steps(1);
  const double per_step = since(t0);
  const int steps = std::max(1, static_cast<int>(seconds / per_step));
  const uint64_t a0 = allocation_count();
  rig.steps(steps);
  Result r;
  r.spec = spec;
  r.batch = b;
  r.threads = t;
  r.allocs_per_step = static_cast<double>(allocation_count() - a0) / steps;
  r.flops_per_image = rig.train_flops();
  std::vector<double> ours, theirs, ratios, old, ratios_old;
  // One peer's run of the same steps, alternating with ours.
  const auto peer = [&](TorchPeer& p, TorchPeer::Run& setting, std::vector<double>& ips, std::vector<double>& q) {
    if (!spec.peer) return;
    const TorchPeer::Run th = p.run(spec.name, torch_threads, b, steps);
    if (th.images_per_s <= 0) return;
    setting = th;
    ips.push_back(th.images_per_s);
    q.push_back(ours.back() / th.images_per_s);
  };
  for (int rep = 0; rep < reps; ++rep) {
    t0 = Clock::now();
    rig.steps(steps);
    ours.push_back(static_cast<double>(b) * steps / since(t0));
    peer(torch, r.torch_setting, theirs, ratios);
    peer(torch_old, r.torch_old_setting, old, ratios_old);
    std::fprintf(stderr, "  %s batch %d threads %d rep %d: %.1f images/s (PyTorch 2 %.1f, 1.13 %.1f)\n",
                 spec.name.c_str(), b, t, rep, ours.back(), theirs.empty() ? 0.0 : theirs.back(),
                 old.empty() ? 0.0 : old.back());
  }
  r.ours = median(ours);
  r.torch = median(theirs);
  r.ratio = median(ratios);
  r.torch_old = median(old);
  r.ratio_old = median(ratios_old);
  *steps_out = steps;
  return r;
}

// "mode images/s" of each mode PyTorch 2 tried, the fastest marked.
std::string torch_modes(const TorchPeer::Run& r) {
  std::string s;
  for (const auto& [mode, ips] : r.modes)
    s += strprintf("%s%s %.1f%s", s.empty() ? "" : ", ", mode.c_str(), ips, mode == r.format ? "*" : "");
  return s.empty() ? "-" : s + strprintf(" (%d thr)", r.threads);
}

// The summary table: each result beside PyTorch 2 (at its best) and 1.13, its target ratio and its share of the
// FMA peak; then what each PyTorch 2 mode reached in the trial.
void print_results(const std::vector<Result>& results, int reps, const Peak& peak) {
  std::printf("\nTraining step, FP32, synthetic data: images/s, median of %d repetitions, cnntrain and PyTorch "
              "alternating; ratio = median of the per-repetition ratios (over PyTorch 2 at its best; 1.13: "
              "Debian's); %%peak = achieved GFLOP/s (nominal training FLOPs) over the measured FMA peak of the "
              "threads used (%.1f GFLOP/s per core); load average now %s\n", reps, peak.per_core,
              load_average().c_str());
  std::printf("%-18s %5s %3s %9s %9s %7s %7s %4s %9s %7s %8s %6s %7s %7s\n", "model", "batch", "thr", "cnntrain",
              "torch2", "ratio", "target", "met", "torch1.13", "ratio", "GFLOP/s", "%peak", "torch%", "allocs");
  for (const Result& r : results) {
    const double gf = r.ours * r.flops_per_image / 1e9, tgf = r.torch * r.flops_per_image / 1e9;
    const int tt = r.torch_setting.threads > 0 ? r.torch_setting.threads : r.threads;
    char target[16] = "-", met[8] = "-";
    if (r.spec.target > 0 && r.torch > 0) {
      std::snprintf(target, sizeof target, "%.1fx", r.spec.target);
      std::snprintf(met, sizeof met, "%s", r.ratio >= r.spec.target ? "yes" : "NO");
    }
    std::printf("%-18s %5d %3d %9.1f %9.1f %6.2fx %7s %4s %9.1f %6.2fx %8.1f %5.0f%% %6.0f%% %7.1f\n",
                r.spec.name.c_str(), r.batch, r.threads, r.ours, r.torch, r.ratio, target, met, r.torch_old,
                r.ratio_old, gf, 100 * gf / (peak.per_core * r.threads), 100 * tgf / (peak.per_core * tt),
                r.allocs_per_step);
  }
  std::printf("\nPyTorch 2 trial images/s per mode at its best thread count (* the fastest, used above):\n");
  for (const Result& r : results)
    if (r.spec.peer) std::printf("  %-18s %s\n", r.spec.name.c_str(), torch_modes(r.torch_setting).c_str());
}

void announce(const TorchPeer& p, const std::string& python, const std::string& script, const std::string& threads) {
  if (!p.ok()) return;
  std::printf("PyTorch %s via %s %s, measured alternately with cnntrain (its fastest of eager contiguous, eager "
              "channels_last%s x threads %s)\n", p.version().c_str(), python.c_str(), script.c_str(),
              p.version() < "torch 2" ? "" : ", torch.compile", threads.c_str());
}

// --import FILE: the imported model with and without the fusion rewrites, appended to the models to run.
bool add_import(const std::string& onnx, const std::string& input, std::vector<ModelSpec>& specs,
                std::string& models) {
  Dims in;
  if (std::sscanf(input.c_str(), "%dx%dx%d", &in.h, &in.w, &in.c) != 3) {
    std::fprintf(stderr, "train_bench: --import-input %s is not HxWxC\n", input.c_str());
    return false;
  }
  specs.push_back({"import", in, 32, 0, nullptr, onnx, true, false});
  specs.push_back({"import_unfused", in, 32, 0, nullptr, onnx, false, false});
  models += ",import,import_unfused";
  return true;
}

struct Options {
  std::string models = "resnet20,lenet5,resnet50,mobilenet_v2", threads = "2", torch_threads = "1,2",
              script = "tests/bench/torch_bench.py", python = "build/pyvenv/bin/python",
              python_old = "/usr/bin/python3", onnx, onnx_input = "64x64x3";
  int batch = 0, reps = 5;
  double seconds = 2;
  bool layers = true, ops = true, convs = true, bn = true, cpu_clock = false;
};

// false: a usage error (printed).
bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") o.models = val();
    else if (a == "--threads") o.threads = val();
    else if (a == "--torch-threads") o.torch_threads = val();
    else if (a == "--batch") o.batch = int_option(a, val(), 0);
    else if (a == "--reps") o.reps = int_option(a, val(), 1);
    else if (a == "--seconds") o.seconds = number_option(a, val(), 0.01, 3600, false);
    else if (a == "--torch") o.script = val();
    else if (a == "--torch-python") o.python = val();
    else if (a == "--torch-old-python") o.python_old = val();
    else if (a == "--import") o.onnx = val();
    else if (a == "--import-input") o.onnx_input = val();
    else if (a == "--no-layers") o.layers = false;
    else if (a == "--no-ops") o.ops = false;
    else if (a == "--no-convs") o.convs = false;
    else if (a == "--no-bn") o.bn = false;
    else if (a == "--ops-cpu-clock") o.cpu_clock = true;
    else {
      std::fprintf(stderr, "usage: train_bench [--models a,b] [--batch N] [--threads 2] [--torch-threads 1,2] "
                   "[--reps N] [--seconds S] [--torch SCRIPT|none] [--torch-python PY] [--torch-old-python PY|none] "
                   "[--import FILE.onnx] [--import-input HxWxC] [--no-layers] [--no-ops] [--no-convs] [--no-bn] "
                   "[--ops-cpu-clock]\n");
      return false;
    }
  }
  return true;
}

int main_impl(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) return 2;
  std::string models = o.models;
  const std::string &threads_s = o.threads, &torch_threads = o.torch_threads, &script = o.script;
  const int batch = o.batch, reps = o.reps;
  std::vector<int> threads;
  for (const auto& t : list_option("--threads", threads_s)) threads.push_back(int_option("--threads", t, 1));
  int max_t = *std::max_element(threads.begin(), threads.end());
  for (const auto& t : list_option("--torch-threads", torch_threads))
    max_t = std::max(max_t, int_option("--torch-threads", t, 1));

  // Every model is looked up before anything is measured: a misspelt name fails at once, not minutes in.
  std::vector<ModelSpec> specs = known_models();
  if (!o.onnx.empty() && !add_import(o.onnx, o.onnx_input, specs, models)) return 2;
  std::vector<ModelSpec> chosen;
  for (const std::string& name : list_option("--models", models)) {
    const auto it = std::find_if(specs.begin(), specs.end(), [&](const ModelSpec& m) { return m.name == name; });
    if (it == specs.end()) {
      std::string known;
      for (const auto& m : specs) known += (known.empty() ? "" : ", ") + m.name;
      std::fprintf(stderr, "train_bench: --models: unknown benchmark model '%s' (known: %s)\n", name.c_str(),
                   known.c_str());
      return 2;
    }
    chosen.push_back(*it);
  }

  std::printf("CPU: %s\n", cpu_description().c_str());
  const Peak peak = measure_peak(max_t);
  std::printf("FP32 peak (FMA micro-benchmark, %s): %.1f GFLOP/s per core alone; %d threads at once: %.1f GFLOP/s "
              "(%.1f per core)\n", peak.isa, peak.per_core, max_t, peak.all_threads, peak.all_threads / max_t);
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("OMP_WAIT_POLICY=%s; load average at start: %s\n", wait ? wait : "(unset)", load_average().c_str());
  TorchPeer torch(o.python, script), torch_old(o.python_old, script);
  announce(torch, o.python, script, torch_threads);
  announce(torch_old, o.python_old, script, torch_threads);

  std::vector<Result> results;
  for (const ModelSpec& spec : chosen) {
    const std::string& name = spec.name;
    if (!spec.build && spec.onnx.empty() && !is_model(name)) {
      std::printf("(%s: not in the model zoo of this build; skipped)\n", name.c_str());
      continue;
    }
    const int b = batch > 0 ? batch : spec.batch;
    for (int t : threads) {
      Rig rig(spec, t, b);
      int steps = 0;
      results.push_back(measure(rig, spec, t, b, o.seconds, reps, torch, torch_old, torch_threads, &steps));
      if (t != max_t && t != threads.back()) continue;
      // The per-layer breakdown runs the layers as a chain.
      if (o.layers && rig.net->is_chain())
        print_layers(name, t, b, std::min(reps, 3), breakdown(rig, spec, std::min(reps, 3)));
      if (o.ops) op_table(spec, t, b, std::max(2, steps), b / results.back().ours, o.cpu_clock);
    }
  }

  print_results(results, reps, peak);
  if (o.convs) conv_table(threads, peak, reps);
  if (o.bn) {
    bn_table(threads, reps);
    activation_table(reps);
  }
  return 0;
}

}  // namespace
}  // namespace cnn::bench

int main(int argc, char** argv) {
  try {
    return cnn::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {  // e.g. a model that cannot be built
    std::fprintf(stderr, "train_bench: error: %s\n", e.what());
    return 2;
  }
}
