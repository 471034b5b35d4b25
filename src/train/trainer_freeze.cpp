// Fine-tuning's frozen parameters in a run (src/train/freeze.h): which part of the net trains in an epoch, and
// the gradient sync over that part only (a frozen prefix of the flat gradient is never computed, so it is not
// summed across the ranks either; frozen parameters between trainable ones are left out of the buckets).
#include "src/comm/comm.h"
#include "src/train/trainer_run.h"

namespace cnn {

void Trainer::apply_freeze(int64_t epoch) {
  const bool frozen = !cfg_.train.freeze.empty() &&
                      (cfg_.train.unfreeze_at_epoch == 0 || epoch < cfg_.train.unfreeze_at_epoch);
  const bool first = freeze_.lr_mult.empty();  // every net has parameters
  if (!first && frozen == frozen_) return;
  frozen_ = frozen;
  freeze_ = plan_freeze(net_, frozen ? cfg_.train.freeze : "", cfg_.train.lr_mult);
  net_.set_frozen_below(freeze_.stop_layer, frozen && cfg_.train.freeze_bn);
  opt_->set_lr_mult(freeze_.lr_mult);
  make_grad_sync();
  if (frozen) {
    size_t inside = 0;
    for (const auto& [b, e] : freeze_.frozen_inside) inside += e - b;
    log_.info("frozen (--train.freeze %s): %zu parameter tensors%s; backward stops at layer %s, the first %zu "
              "parameters are neither computed nor allreduced, %zu more above them not allreduced; optimizer state "
              "%.3g MiB, for the trainable parameters only%s", cfg_.train.freeze.c_str(), freeze_.frozen.size(),
              cfg_.train.unfreeze_at_epoch > 0 ? strprintf(" until epoch %d", cfg_.train.unfreeze_at_epoch).c_str()
                                               : "",
              net_.layers()[freeze_.stop_layer]->name().c_str(), freeze_.trainable_offset, inside,
              opt_->state_bytes() / 1048576.0,
              cfg_.train.freeze_bn ? "; their batch norm uses its running statistics" : "");
  } else if (!first) {
    log_.info("epoch %lld: every parameter trains from now on (--train.unfreeze_at_epoch)", (long long)epoch);
  }
}

void Trainer::make_grad_sync() {
  sc_.sync_offset = freeze_.trainable_offset;
  sc_.frozen_inside = freeze_.frozen_inside;
  if (!comm_) return;
  sync_.reset();  // its buckets are done: rebuilt between steps
  GradSyncOptions go;
  go.bucket_bytes = static_cast<size_t>(cfg_.comm.bucket_mb * 1048576.0);
  go.overlap = cfg_.comm.overlap;
  go.wire = cfg_.comm.grad_dtype == "bf16"   ? GradWire::kBF16
            : cfg_.comm.grad_dtype == "fp16" ? GradWire::kF16
                                             : GradWire::kF32;
  const size_t off = freeze_.trainable_offset;
  for (const auto& [b, e] : freeze_.frozen_inside) go.skip.emplace_back(b - off, e - off);
  sync_ = comm_->make_grad_sync(net_.grads() + off, net_.num_params() - off, go);
  log_.info("gradient sync: %s; summed in %s%s; %zu bucket%s of up to %.3g MiB, %s; collective timeout %.0f s",
            comm_->describe().c_str(), cfg_.comm.grad_dtype.c_str(),
            go.wire == GradWire::kF32 ? "" : " (rounded from the fp32 gradient, widened back after the sum)",
            sync_->num_buckets(), sync_->num_buckets() == 1 ? "" : "s", cfg_.comm.bucket_mb,
            cfg_.comm.overlap ? "started during backward" : "started after backward (--comm.overlap false)",
            cfg_.comm.timeout_s);
}

}  // namespace cnn
