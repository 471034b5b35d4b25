#include "src/obs/run_observer.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/obs/rank_report.h"

namespace cnn {

RunObserver::RunObserver(const ObsOptions& opt, Backend& be, Net& net, RunLog& log, const BindingRow& binding)
    : opt_(opt), be_(be), net_(net), log_(log), hosts_(gather_host_names()), timing_(be, world_rank()),
      pci_bus_id_(opt.device == "cuda" ? binding.pci_bus_id : "") {}

RunObserver::~RunObserver() { log_.set_event_sink(nullptr); }

void RunObserver::begin(const std::string& run_dir, int64_t start, int64_t total, int64_t spe) {
  if (world_rank() == 0 && opt_.tensorboard) {
    tb_ = std::make_unique<TensorBoardLog>();
    tb_->open(run_dir, host_name(), start);
    log_.info("TensorBoard: %s (tensorboard --logdir %s)", tb_->file().path().c_str(), run_dir.c_str());
  }
  prom_ = std::make_unique<PrometheusExporter>(opt_, hosts_, run_dir, log_);
  // Rank 0's events (the only ones RunLog hands on); other ranks feed their node's file in log_ranks.
  log_.set_event_sink([this](const Json& j) {
    if (tb_) tb_->write(j);
    prom_->on_event(j);
  });
  start_gpu_sampler();
  progress_ = std::make_unique<Progress>(log_, world_rank() == 0 && progress_bar_wanted(opt_.progress), start,
                                         total, spe);
}

void RunObserver::start_gpu_sampler() {
  if (opt_.gpu_stats_s <= 0) return;
  const char* env = std::getenv("CNNTRAIN_TEST_NVML");
  const std::string fake = env ? env : "";
  const bool has_gpu = !pci_bus_id_.empty();
  std::string why;
  std::unique_ptr<NvmlDevice> dev;
  // Only the fake library has a device to give a rank without a GPU: index <node-local rank>.
  if (has_gpu || !fake.empty())
    dev = NvmlDevice::open(fake.empty() ? "libnvidia-ml.so.1" : fake, pci_bus_id_,
                           static_cast<unsigned>(local_rank()), &why);
  int64_t with = dev ? 1 : 0;
  allreduce_sum(&with, 1);
  if (!fake.empty())
    log_.info("test-only: NVML is %s (CNNTRAIN_TEST_NVML), not libnvidia-ml.so.1; a rank without a GPU samples its "
              "device <node-local rank>", fake.c_str());
  if (!has_gpu && fake.empty()) {
    log_.info("GPU figures: none (--device %s has no GPU)", opt_.device.c_str());
    return;
  }
  if (with == 0) {
    log_.info("GPU figures: none: %s", why.c_str());  // rank 0's reason, most likely everyone's
    return;
  }
  const std::string mine = !dev ? "none: " + why
                           : strprintf("%s, %s", dev->name().c_str(),
                                       has_gpu ? pci_bus_id_.c_str() : strprintf("index %d", local_rank()).c_str());
  log_.info("GPU figures: NVML every %g s on %lld of %d ranks (rank 0: %s)", opt_.gpu_stats_s, (long long)with,
            world_size(), mine.c_str());
  if (!dev && world_rank() != 0) rank_warning(log_, "GPU figures: none on this rank: " + why);
  if (dev) gpu_ = std::make_unique<GpuSampler>(std::move(dev), opt_.gpu_stats_s);
}

void RunObserver::after_step(int64_t done, double loss) {
  ++steps_since_;
  timing_.poll();
  if (progress_) progress_->on_step(done, loss);
}

void RunObserver::add_train_fields(Json& j, int64_t done, double grad_norm) {
  if (grad_norm < 0) grad_norm = std::sqrt(be_.sum_squares(net_.num_params(), net_.grads()));
  const Eta e = progress_->eta(done);
  const MemoryUse m = be_.memory_use();
  j.add("grad_norm", grad_norm).add("elapsed_s", e.elapsed).add("eta_epoch_s", e.epoch).add("eta_s", e.run)
      .add("mem_in_use", static_cast<double>(m.in_use)).add("mem_peak", static_cast<double>(m.peak));
  if (!gpu_) return;
  gpu_window_ = gpu_->take();
  const std::string problem = gpu_->take_problem();
  if (!problem.empty()) rank_warning(log_, "NVML: " + problem + "; that figure is left out");
  for (int i = 0; i < kNumGpuFigures; ++i)
    if (std::isfinite(gpu_figure(gpu_window_, i))) j.add(gpu_figure_name(i), gpu_figure(gpu_window_, i));
}

std::string RunObserver::eta_text(int64_t done) const {
  const Eta e = progress_->eta(done);
  return strprintf(" | elapsed %s, ETA epoch %s, run %s", format_duration(e.elapsed).c_str(),
                   format_duration(e.epoch).c_str(), format_duration(e.run).c_str());
}

void RunObserver::log_ranks(int64_t done) {
  RankSample mine;
  mine.phase = timing_.take();
  const MemoryUse m = be_.memory_use();
  mine.mem_in_use = static_cast<double>(m.in_use);
  mine.mem_peak = static_cast<double>(m.peak);
  read_process_memory(&mine.rss, &mine.rss_peak);
  mine.gpu = gpu_window_;
  mine.steps = steps_since_;
  steps_since_ = 0;
  const std::vector<RankSample> all = gather_rank_samples(mine);
  const std::vector<Straggler> slow = find_stragglers(all, opt_.straggler_pct);
  for (const Straggler& s : slow) log_.warn("%s", describe_straggler(s, hosts_).c_str());
  const Json ranks = ranks_event(done, all, slow);
  log_.event(ranks);
  if (world_rank() != 0) prom_->on_event(ranks);  // rank 0's came through the event sink
  prom_->interval_done();
}

void RunObserver::maybe_histograms(int64_t done) {
  if (!tb_ || opt_.histograms_every <= 0 || done % opt_.histograms_every != 0) return;
  const size_t n = net_.num_params();
  std::vector<float> w(n), g(n);
  be_.download(w.data(), net_.params(), sizeof(float) * n);
  be_.download(g.data(), net_.grads(), sizeof(float) * n);
  for (const ParamInfo& p : net_.param_table()) {
    tb_->file().histogram("weights/" + p.name, done, w.data() + p.offset, p.size);
    tb_->file().histogram("grads/" + p.name, done, g.data() + p.offset, p.size);
  }
  tb_->file().flush();
}

void RunObserver::finish() {
  if (progress_) progress_->finish();
}

}  // namespace cnn
