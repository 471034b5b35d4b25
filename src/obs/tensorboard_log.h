// metrics.jsonl events mirrored into TensorBoard: every numeric field of an event that has a "step" becomes
// the scalar "<event>/<field>" at that step (train/loss, train/lr, eval/test_acc, ...), and every numeric
// array field of the per-rank event becomes one scalar per rank, "<event>/<field>/r<rank>". TensorBoard
// therefore holds exactly the values of metrics.jsonl (as float32), and a field added to an event is a new
// scalar with no further code.
#pragma once
#include <cstdint>
#include <string>

#include "src/obs/event_file.h"
#include "src/obs/runlog.h"

namespace cnn {

class TensorBoardLog {
 public:
  // Opens a new event file in run_dir/tensorboard. A run resumed at `start_step` (optimizer steps done)
  // marks a restart there, so TensorBoard drops what an earlier process logged after that step.
  void open(const std::string& run_dir, const std::string& host, int64_t start_step);
  void write(const Json& event);
  EventFileWriter& file() { return file_; }

 private:
  EventFileWriter file_;
};

}  // namespace cnn
