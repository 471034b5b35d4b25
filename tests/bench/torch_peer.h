// The PyTorch side of the training benchmark: tests/bench/torch_bench.py --serve behind two pipes, so that
// cnntrain and PyTorch are measured alternately in one run and see the same machine load. One peer per
// PyTorch: 2.x from PyPI (build/pyvenv) and Debian's 1.13 (/usr/bin/python3).
#pragma once
#include <map>
#include <string>
#include <sys/types.h>

namespace cnn::bench {

class TorchPeer {
 public:
  // Starts `script` with the interpreter `python`; "none" for either, or a failure to start, leaves the peer
  // off (ok() false, with a note on stderr naming what to install).
  TorchPeer(const std::string& python, const std::string& script);
  ~TorchPeer();
  TorchPeer(const TorchPeer&) = delete;
  TorchPeer& operator=(const TorchPeer&) = delete;
  bool ok() const { return in_ != nullptr; }
  const std::string& version() const { return version_; }

  struct Run {
    double images_per_s = 0;  // 0: failed
    std::string format;       // the fastest mode: contiguous | channels_last | compile (torch.compile)
    int threads = 0;
    std::map<std::string, double> modes;  // each mode's trial images/s at its best thread count
  };
  // images/s of `steps` training steps of `model` at `batch`. The first request for a (model, batch) tries
  // every mode and every thread count in `threads` (comma list) and keeps the fastest setting.
  Run run(const std::string& model, const std::string& threads, int batch, int steps);

 private:
  void stop();
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  FILE* in_ = nullptr;
  std::string version_;
};

}  // namespace cnn::bench
