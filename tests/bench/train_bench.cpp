// Training-step benchmark of the CPU backend (`make bench-train`, part of `make bench`): images/s of each
// benchmark model at batch 128 with 1 and 2 threads, measured alternately with PyTorch (tests/bench/
// torch_bench.py, same architecture, batch and threads) so both see the same machine load; the ratio is the
// median of the per-repetition ratios. Also: the machine's measured FMA peak, achieved GFLOP/s and fraction of
// peak, heap allocations per step after warm-up, a per-layer forward/backward breakdown (plus data,
// loss and optimizer), and the 3x3 >=64-channel convolutions op by op.
//
//   build/bench/train_bench [--models lenet5,fmnist_cnn,resnet20,resnet20_plain] [--threads 1,2] [--batch 128]
//                           [--reps 5] [--seconds 1.5] [--torch tests/bench/torch_bench.py | --torch none]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "io/loader.h"
#include "kernels/cpu_backend.h"
#include "kernels/dnnl_ops.h"
#include "kernels/rng.h"
#include "src/model/zoo.h"
#include "src/model/net.h"
#include "src/train/optimizer.h"
#include "src/train/step.h"
#include "tests/bench/alloc_count.h"
#include "tests/bench/peak.h"

namespace cnn::bench {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string load_average() {
  char buf[128] = "?";
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  for (size_t a = 0, b; a <= s.size(); a = b + 1) {
    b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
  }
  return out;
}

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
  std::function<void(Net&)> build;  // null: from the model zoo
};

// The benchmark models. Zoo models that do not exist (yet) are skipped with a note.
std::vector<ModelSpec> known_models() {
  return {{"lenet5", {28, 28, 1}, nullptr},
          {"fmnist_cnn", {28, 28, 1}, nullptr},
          {"resnet20", {32, 32, 3}, nullptr},
          {"resnet20_plain", {32, 32, 3}, resnet20_plain}};
}

// PyTorch side: torch_bench.py --serve behind two pipes.
class Torch {
 public:
  explicit Torch(const std::string& script) {
    int to[2], from[2];
    if (script == "none" || access(script.c_str(), R_OK) != 0 || pipe(to) || pipe(from)) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to[0], 0);
      dup2(from[1], 1);
      close(to[1]);
      close(from[0]);
      execl("/usr/bin/python3", "python3", script.c_str(), "--serve", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to[0]);
    close(from[1]);
    out_ = fdopen(to[1], "w");
    in_ = fdopen(from[0], "r");
    char line[256];
    if (!fgets(line, sizeof line, in_) || std::strncmp(line, "ready", 5) != 0) {
      std::fprintf(stderr, "train_bench: %s did not start (is python3-torch installed?); no PyTorch figures\n",
                   script.c_str());
      stop();
      return;
    }
    version_ = line + 6;
    version_.erase(version_.find_last_not_of("\n ") + 1);
  }
  ~Torch() { stop(); }
  bool ok() const { return in_ != nullptr; }
  const std::string& version() const { return version_; }
  // images/s of `steps` training steps; 0 on failure.
  double run(const std::string& model, int threads, int batch, int steps, std::string* format) {
    if (!ok()) return 0;
    std::fprintf(out_, "%s %d %d %d\n", model.c_str(), threads, batch, steps);
    std::fflush(out_);
    char line[256], fmt[64] = "";
    double ips = 0;
    if (!fgets(line, sizeof line, in_) || std::sscanf(line, "ips %lf %63s", &ips, fmt) < 1) return 0;
    *format = fmt;
    return ips;
  }

 private:
  void stop() {
    if (out_) {
      std::fputs("quit\n", out_);
      std::fclose(out_);
    }
    if (in_) std::fclose(in_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    out_ = in_ = nullptr;
    pid_ = -1;
  }
  pid_t pid_ = -1;
  FILE *out_ = nullptr, *in_ = nullptr;
  std::string version_;
};

// One model on one backend, with the buffers and optimizer of a training step on synthetic data.
struct Rig {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Net> net;
  std::unique_ptr<Optimizer> opt;
  StepBuffers buf;
  int batch;

  Rig(const ModelSpec& m, int threads, int batch) : batch(batch) {
    be = make_cpu_backend(threads, CpuKernels::kFast);
    net = std::make_unique<Net>(*be, m.input, 10);
    if (m.build) m.build(*net);
    else build_model(m.name, *net);
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
    be.softmax_xent(n, 10, cur, r.buf.labels, 0.f, 1.f / n, dlogits, &loss, &correct);
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
  std::string model;
  int threads = 0;
  double ours = 0, torch = 0, ratio = 0, gflops = 0, allocs_per_step = 0;
  std::string torch_format;
};

void conv_table(const std::vector<int>& threads, const Peak& peak, int reps) {
  struct Shape { const char* where; ConvDesc d; };
  auto cd = [](int h, int c, int k) {
    ConvDesc d;
    d.n = 128, d.h = d.w = h, d.c = c, d.k = k, d.r = d.s = 3, d.pad_h = d.pad_w = 1;
    return d;
  };
  const std::vector<Shape> shapes = {{"resnet20 stage 3", cd(8, 64, 64)},
                                     {"64ch at 16x16", cd(16, 64, 64)},
                                     {"128ch at 8x8", cd(8, 128, 128)}};
  std::printf("\n3x3 convolutions with >= 64 channels, batch 128, op by op: GFLOP/s and %% of the measured peak of "
              "the threads used,\nmedian | best of %d (nominal FLOPs: padded taps count; at 8x8, 16%% of the taps are "
              "padding)\n", reps);
  std::printf("%-18s %-14s %3s  %-24s %-24s %-24s\n", "shape", "NHWC in->out", "thr", "forward", "backward-data",
              "backward-filter");
  for (const Shape& s : shapes) {
    const ConvDesc& d = s.d;
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    const size_t nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    std::vector<float> x(nx, 0.5f), y(ny, 0.25f), w(nw, 0.01f), dw(nw, 0.f), b(d.k, 0.f), db(d.k, 0.f), dx(nx);
    const double flops = 2.0 * d.n * d.p() * d.q() * d.k * d.r * d.s * d.c;
    std::string impl;
    for (int t : threads) {
      DnnlOps ops(t);
      impl = ops.conv_impl(d);
      std::function<void()> fn[3] = {[&] { ops.conv_forward(d, x.data(), w.data(), b.data(), y.data()); },
                                     [&] { ops.conv_backward_data(d, y.data(), w.data(), dx.data()); },
                                     [&] { ops.conv_backward_filter(d, x.data(), y.data(), dw.data(), db.data()); }};
      char cell[3][80];
      for (int k = 0; k < 3; ++k) {
        fn[k]();
        std::vector<double> ts;
        for (int rep = 0; rep < reps; ++rep) {
          auto t0 = Clock::now();
          fn[k]();
          ts.push_back(since(t0));
        }
        const double gf = flops / median(ts) / 1e9, best = flops / *std::min_element(ts.begin(), ts.end()) / 1e9;
        const double pk = peak.per_core * t;
        std::snprintf(cell[k], sizeof cell[k], "%5.0f %3.0f%% | %5.0f %3.0f%%", gf, 100 * gf / pk, best, 100 * best / pk);
      }
      char shape[32];
      std::snprintf(shape, sizeof shape, "%dx%dx%d->%d", d.h, d.w, d.c, d.k);
      std::printf("%-18s %-14s %3d  %-24s %-24s %-24s\n", s.where, shape, t, cell[0], cell[1], cell[2]);
    }
    std::printf("%-18s oneDNN: %s (backward-data of stride-1 convs runs as a flipped forward)\n", "",
                impl.c_str());
  }
}

int main_impl(int argc, char** argv) {
  std::string models = "lenet5,fmnist_cnn,resnet20,resnet20_plain", threads_s = "1,2",
              script = "tests/bench/torch_bench.py";
  int batch = 128, reps = 5;
  double seconds = 1.5;
  bool layers = true, convs = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") models = val();
    else if (a == "--threads") threads_s = val();
    else if (a == "--batch") batch = std::stoi(val());
    else if (a == "--reps") reps = std::stoi(val());
    else if (a == "--seconds") seconds = std::stod(val());
    else if (a == "--torch") script = val();
    else if (a == "--no-layers") layers = false;
    else if (a == "--no-convs") convs = false;
    else {
      std::fprintf(stderr, "usage: train_bench [--models a,b] [--threads 1,2] [--batch N] [--reps N] [--seconds S] "
                   "[--torch SCRIPT|none] [--no-layers] [--no-convs]\n");
      return 2;
    }
  }
  std::vector<int> threads;
  for (const auto& t : split(threads_s)) threads.push_back(std::stoi(t));
  const int max_t = *std::max_element(threads.begin(), threads.end());

  const Peak peak = measure_peak(max_t);
  std::printf("FP32 peak (FMA micro-benchmark, %s): %.1f GFLOP/s per core alone; %d threads at once: %.1f GFLOP/s "
              "(%.1f per core)\n", peak.isa, peak.per_core, max_t, peak.all_threads, peak.all_threads / max_t);
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("OMP_WAIT_POLICY=%s; load average at start: %s\n", wait ? wait : "(unset)", load_average().c_str());
  Torch torch(script);
  if (torch.ok()) std::printf("PyTorch %s via %s, measured alternately with cnntrain\n", torch.version().c_str(),
                              script.c_str());

  std::vector<Result> results;
  std::vector<std::pair<std::string, std::vector<LayerTime>>> layer_tables;
  for (const std::string& name : split(models)) {
    ModelSpec spec;
    bool found = false;
    for (const auto& m : known_models())
      if (m.name == name) spec = m, found = true;
    if (!found) {
      std::fprintf(stderr, "train_bench: unknown benchmark model '%s'\n", name.c_str());
      return 2;
    }
    if (!spec.build && !is_model(name)) {
      std::printf("(%s: not in the model zoo of this build; skipped)\n", name.c_str());
      continue;
    }
    for (int t : threads) {
      Rig rig(spec, t, batch);
      rig.steps(2);
      auto t0 = Clock::now();
      rig.steps(2);
      const double per_step = since(t0) / 2;
      const int steps = std::max(3, static_cast<int>(seconds / per_step));
      const uint64_t a0 = allocation_count();
      rig.steps(steps);
      Result r;
      r.model = name;
      r.threads = t;
      r.allocs_per_step = static_cast<double>(allocation_count() - a0) / steps;
      std::vector<double> ours, theirs, ratios;
      for (int rep = 0; rep < reps; ++rep) {
        t0 = Clock::now();
        rig.steps(steps);
        ours.push_back(static_cast<double>(batch) * steps / since(t0));
        const double th = torch.run(name, t, batch, steps, &r.torch_format);
        if (th > 0) {
          theirs.push_back(th);
          ratios.push_back(ours.back() / th);
        }
      }
      r.ours = median(ours);
      r.torch = median(theirs);
      r.ratio = median(ratios);
      r.gflops = r.ours * rig.train_flops() / 1e9;
      results.push_back(r);
      std::fprintf(stderr, "  %s threads %d: %.0f images/s (PyTorch %.0f)\n", name.c_str(), t, r.ours, r.torch);
      if (layers && t == max_t) layer_tables.push_back({name, breakdown(rig, spec, reps)});
    }
  }

  std::printf("\nTraining step, batch %d, FP32, synthetic data: images/s (median of %d repetitions, cnntrain and "
              "PyTorch alternating)\n", batch, reps);
  std::printf("%-16s %3s %12s %12s %8s %10s %7s %11s  %s\n", "model", "thr", "cnntrain", "pytorch", "ratio",
              "GFLOP/s", "%peak", "allocs/step", "pytorch layout");
  for (const Result& r : results)
    std::printf("%-16s %3d %12.0f %12.0f %7.2fx %10.1f %6.0f%% %11.1f  %s\n", r.model.c_str(), r.threads, r.ours,
                r.torch, r.ratio, r.gflops, 100 * r.gflops / (peak.per_core * r.threads), r.allocs_per_step,
                r.torch_format.c_str());

  for (const auto& [name, rows] : layer_tables) {
    std::printf("\nPer-layer breakdown: %s, %d threads, batch %d (median of %d; GFLOP/s of the layer's "
                "forward / backward)\n", name.c_str(), max_t, batch, reps);
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
  if (convs) conv_table(threads, peak, reps);
  return 0;
}

}  // namespace
}  // namespace cnn::bench

int main(int argc, char** argv) { return cnn::bench::main_impl(argc, argv); }
