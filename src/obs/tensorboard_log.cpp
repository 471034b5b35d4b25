#include "src/obs/tensorboard_log.h"

#include <cmath>

#include "src/base/error.h"

namespace cnn {

void TensorBoardLog::open(const std::string& run_dir, const std::string& host, int64_t start_step) {
  file_.open(run_dir + "/tensorboard", host);
  // Train events report the steps done so far, so the first one after a resume at step s is s + 1 or later.
  if (start_step > 0) file_.session_start(start_step + 1);
  file_.flush();
}

void TensorBoardLog::write(const Json& event) {
  int64_t step = -1;
  for (const auto& [k, v] : event.numbers())
    if (k == "step") step = static_cast<int64_t>(v);
  if (step < 0 || event.event().empty()) return;
  for (const auto& [k, v] : event.numbers())
    if (k != "step" && std::isfinite(v)) file_.scalar(event.event() + "/" + k, step, v);
  for (const auto& [k, vs] : event.arrays())
    for (size_t r = 0; r < vs.size(); ++r)
      if (std::isfinite(vs[r])) file_.scalar(strprintf("%s/%s/r%zu", event.event().c_str(), k.c_str(), r), step, vs[r]);
  file_.flush();
}

}  // namespace cnn
