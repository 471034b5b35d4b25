// Stochastic weight averaging (--train.swa_start_epoch, docs/options.md), as torch.optim.swa_utils' standard
// recipe runs it: an equal-weight average of the weights at the end of every epoch from the start epoch on
// (AveragedModel.update_parameters), in fp32 on the device beside the master weights (every rank holds the full
// copy: the weights are the same on every rank after each step, and so is the average); at the end of training
// the batch-norm running statistics recomputed for the averaged weights over the training set (update_bn), then
// evaluated. The learning rate of the SWA epochs (SWALR) is src/train/schedule.h.
#pragma once
#include <cstdint>
#include <functional>

#include "kernels/backend.h"
#include "kernels/collectives.h"
#include "src/model/net.h"
#include "src/train/step.h"

namespace cnn {

class SwaAverage {
 public:
  // No model averaged yet; the average and its statistics are zero until then.
  SwaAverage(Backend& be, size_t num_params, size_t num_buffers);
  ~SwaAverage();
  SwaAverage(const SwaAverage&) = delete;
  SwaAverage& operator=(const SwaAverage&) = delete;

  // Folds the weights w[0, num_params) in: the first model is copied, model n+1 moves the average by
  // (w - avg) / (n + 1) (as avg * n/(n+1) + w * 1/(n+1)).
  void update(const float* w);
  // Models averaged so far (AveragedModel's n_averaged).
  int64_t models() const { return models_; }
  // How many models the average held when its batch-norm statistics were recomputed (0: never).
  int64_t bn_models() const { return bn_models_; }
  // The statistics belong to the average as it is now.
  bool bn_current() const { return models_ > 0 && bn_models_ == models_; }
  void mark_bn_current() { bn_models_ = models_; }
  // Both counts, from a checkpoint.
  void set_counts(int64_t models, int64_t bn_models) {
    models_ = models;
    bn_models_ = bn_models;
  }
  float* params() { return params_; }
  float* buffers() { return buffers_; }
  size_t num_params() const { return np_; }
  size_t num_buffers() const { return nb_; }

  // Exchanges the average and its statistics with the net's parameters and buffers (through a scratch
  // buffer): done twice, all are as they were, bit for bit. The caller refreshes what it derives from the
  // parameters (Net::sync_weight_copy).
  void swap_with(Net& net);

 private:
  Backend& be_;
  size_t np_, nb_;
  float* params_ = nullptr;
  float* buffers_ = nullptr;
  int64_t models_ = 0, bn_models_ = 0;
};

// What recompute_bn_statistics runs through.
struct BnPass {
  int64_t batches = 0;    // this rank's local batches
  int local_batch = 1;
  int accum_steps = 1;    // micro-batches per local batch, each normalised with its own statistics (train_step)
  uint64_t seed = 0;      // dropout's key, with the pass's batch index and the global sample ids
  Collectives* comm = nullptr;  // the ranks (null: this process alone)
};

// torch.optim.swa_utils.update_bn for the net's current weights: every batch norm's running statistics become
// the equal-weight average of the statistics of the batches it normalises in train mode over p.batches local
// batches (torch's momentum None: the mean of the batch means, the mean of the unbiased batch variances), with
// no weight update; `load(i)` puts this rank's i-th batch into buf.x and buf.ids. Then (collective) their mean
// over the ranks of p.comm (average_buffers). A batch is what the layer normalises: a ghost group
// (--bn.group_size), the global batch (--bn.sync), else the rank's micro-batch; with either of the first two
// the batches are the same on every rank count and every rank averages an equal share of them, so the result
// does not depend on the rank count.
void recompute_bn_statistics(Backend& be, Net& net, const BnPass& p, const StepBuffers& buf,
                             const std::function<void(int64_t)>& load);

}  // namespace cnn
