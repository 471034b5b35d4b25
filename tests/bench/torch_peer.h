// The PyTorch side of the training benchmark: tests/bench/torch_bench.py --serve behind two pipes, so that
// cnntrain and PyTorch are measured alternately in one run and see the same machine load.
#pragma once
#include <string>
#include <sys/types.h>

namespace cnn::bench {

class TorchPeer {
 public:
  // Starts `script` with /usr/bin/python3; "none" or a failure to start leaves the peer off (ok() false).
  explicit TorchPeer(const std::string& script);
  ~TorchPeer();
  TorchPeer(const TorchPeer&) = delete;
  TorchPeer& operator=(const TorchPeer&) = delete;
  bool ok() const { return in_ != nullptr; }
  const std::string& version() const { return version_; }

  struct Run {
    double images_per_s = 0;  // 0: failed
    std::string format;       // contiguous | channels_last
    int threads = 0;
  };
  // images/s of `steps` training steps of `model` at `batch`. The first request for a (model, batch) tries
  // every memory format and every thread count in `threads` (comma list) and keeps the fastest setting.
  Run run(const std::string& model, const std::string& threads, int batch, int steps);

 private:
  void stop();
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  FILE* in_ = nullptr;
  std::string version_;
};

}  // namespace cnn::bench
