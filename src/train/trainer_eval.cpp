// --eval-only: the evaluation of a checkpoint's weights, without training (docs/models.md, "Evaluation").
#include <cmath>
#include <fstream>

#include "src/comm/comm.h"
#include "src/train/eval_report.h"
#include "src/train/trainer_run.h"

namespace cnn {

int Trainer::evaluate_only(const Cursor& start) {
  // The weights evaluated: the checkpoint resumed, else the file --init.from loaded (weights only, step 0).
  const std::string source = !ckpt_->resumed_from().empty() ? ckpt_->resumed_from() : cfg_.init.from;
  if (source.empty())
    raise(kExitCheckpoint, "--eval-only: no checkpoint was loaded (--resume %s found none in %s); give --resume "
          "with a checkpoint file, or --init.from", cfg_.resume.c_str(), ckpt_dir_.c_str());
  const auto te = Clock::now();
  const int classes = net_.num_classes();
  average_buffers(be_, net_, comm_.get());  // as the training-time evaluation and the checkpoints do
  confusion_.assign(static_cast<size_t>(classes) * classes, 0);
  last_eval_ = evaluate();
  have_eval_ = true;
  const std::vector<double> per_class = per_class_accuracy(confusion_, classes);
  const int64_t step = start.step;
  const std::string png = run_dir_ + "/eval/confusion-" + std::to_string(step) + ".png";
  log_.info("evaluation of %s (step %lld): test loss %.4f test accuracy %.2f%%%s (%lld images, %.1f s); "
            "confusion matrix %s", source.c_str(), (long long)step, last_eval_.loss,
            100 * last_eval_.acc,
            std::isnan(last_eval_.top5) ? "" : strprintf(" top-5 %.2f%%", 100 * last_eval_.top5).c_str(),
            (long long)last_eval_.count, since(te), png.c_str());
  if (world_rank() == 0) {
    mkdir_p(run_dir_ + "/eval");
    const std::string bytes = confusion_png(confusion_, classes);
    std::ofstream f(png, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.good()) raise(kExitFailure, "cannot write '%s' (disk full?)", png.c_str());
  }
  Json j;
  j.add("event", "eval").add("epoch", start.epoch).add("step", step).add("test_loss", last_eval_.loss)
      .add("test_acc", last_eval_.acc).add("count", last_eval_.count);
  if (!std::isnan(last_eval_.top5)) j.add("test_top5", last_eval_.top5);
  j.add("eval_only", 1).add("checkpoint", source).add("per_class_acc", per_class)
      .add("confusion", confusion_).add("confusion_png", png);
  log_.event(j);
  obs_->finish();
  Json e;
  e.add("event", "end").add("status", "completed").add("steps", step).add("final_test_acc", last_eval_.acc)
      .add("wall_s", since(t_start_));
  log_.event(e);
  return kExitOk;
}

}  // namespace cnn
