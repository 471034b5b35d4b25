// Stochastic weight averaging in the run (src/train/swa.h): the average at epoch ends, its batch-norm
// statistics after the last step, and its evaluation.
#include "src/comm/comm.h"
#include "src/train/trainer_run.h"

namespace cnn {

void Trainer::plan_swa() {
  const int e = cfg_.train.swa_start_epoch;
  if (e <= 0) return;
  const SwaLr& lr = sched_.swa;
  if (lr.start_step >= total_)
    raise(kExitUsage, "option --train.swa_start_epoch %d: SWA would start at step %lld, but the run ends after step "
          "%lld (--train.max_steps %lld); start it earlier or train longer", e, (long long)lr.start_step,
          (long long)total_, (long long)cfg_.train.max_steps);
  const Net& net = net_;
  swa_ = std::make_unique<SwaAverage>(be_, net.num_params(), net.num_buffers());
  log_.info("SWA from epoch %d (step %lld): learning rate %g (the schedule's) annealed to %g over %d epoch%s (%s), "
            "constant within each epoch; the weights averaged at the end of every epoch from %d on; batch-norm "
            "statistics recomputed for the average over the training set after the last step", e + 1,
            (long long)lr.start_step + 1, sched_.scheduled(lr.start_step), lr.swa_lr, (int)lr.anneal_epochs,
            lr.anneal_epochs == 1 ? "" : "s", cfg_.train.swa_anneal.c_str(), e + 1);
}

void Trainer::swa_epoch_end(const BatchPos& pos, int64_t step) {
  if (pos.epoch < cfg_.train.swa_start_epoch) return;
  const Net& net = net_;
  swa_->update(net.params());
  if (step == total_ - 1) recompute_swa_bn();
}

void Trainer::recompute_swa_bn() {
  const auto t0 = Clock::now();
  if (net_.num_buffers() > 0) {
    swa_->swap_with(net_);
    net_.sync_weight_copy();
    // The order and augmentation draws of the epoch after the last one trained: a whole epoch, every rank's
    // share of the same global batches whatever the rank count.
    const int64_t epoch = (total_ + spe_ - 1) / spe_;
    Loader loader(*s_.train, *sampler_, world_rank(), world_size(), cfg_.data.prefetch, epoch, 0, spe_,
                  make_augment_config(cfg_), input_->loader_output());
    BnPass p;
    p.batches = spe_;
    p.local_batch = s_.local_batch;
    p.accum_steps = cfg_.train.accum_steps;
    p.seed = cfg_.seed;
    p.comm = comm_.get();
    recompute_bn_statistics(be_, net_, p, buf_, [&](int64_t) {
      double wait = 0;
      input_->upload(loader.next(&wait));
    });
    swa_->swap_with(net_);
    net_.sync_weight_copy();
  }
  swa_->mark_bn_current();
  log_.info("SWA: the average of %lld models; its batch-norm statistics recomputed over %lld training batches "
            "(%.1f s)", (long long)swa_->models(), (long long)(net_.num_buffers() > 0 ? spe_ : 0), since(t0));
  iv_.start = Clock::now();  // not training throughput
}

EvalResult Trainer::evaluate_swa() {
  swa_->swap_with(net_);
  net_.sync_weight_copy();
  const EvalResult r = evaluate();
  swa_->swap_with(net_);
  net_.sync_weight_copy();
  return r;
}

}  // namespace cnn
