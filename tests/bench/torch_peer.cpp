#include "tests/bench/torch_peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace cnn::bench {

TorchPeer::TorchPeer(const std::string& python, const std::string& script) {
  int to[2], from[2];
  if (python == "none" || script == "none") return;
  if (access(script.c_str(), R_OK) != 0 || access(python.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "train_bench: cannot run %s with %s (PyTorch 2: `make pyvenv`; 1.13: `make deps`); no "
                 "figures from it\n", script.c_str(), python.c_str());
    return;
  }
  if (pipe(to)) return;
  if (pipe(from)) {
    close(to[0]);
    close(to[1]);
    return;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    execl(python.c_str(), python.c_str(), script.c_str(), "--serve", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  out_ = fdopen(to[1], "w");
  in_ = fdopen(from[0], "r");
  char line[256];
  if (!fgets(line, sizeof line, in_) || std::strncmp(line, "ready", 5) != 0) {
    std::fprintf(stderr, "train_bench: %s %s did not start (does it have torch and torchvision? PyTorch 2: `make "
                 "pyvenv`; 1.13: `make deps`); no figures from it\n", python.c_str(), script.c_str());
    stop();
    return;
  }
  version_ = line + 6;
  version_.erase(version_.find_last_not_of("\n ") + 1);
}

TorchPeer::~TorchPeer() { stop(); }

TorchPeer::Run TorchPeer::run(const std::string& model, const std::string& threads, int batch, int steps) {
  Run r;
  if (!ok()) return r;
  std::fprintf(out_, "%s %s %d %d\n", model.c_str(), threads.c_str(), batch, steps);
  std::fflush(out_);
  char line[512], fmt[64] = "";
  int thr = 0, used = 0;
  if (!fgets(line, sizeof line, in_) ||
      std::sscanf(line, "ips %lf %63s %d%n", &r.images_per_s, fmt, &thr, &used) < 3) {
    r.images_per_s = 0;
    return r;
  }
  r.format = fmt;
  r.threads = thr;
  // " mode=images_per_s" fields
  char mode[64];
  double ips = 0;
  for (int n = 0; std::sscanf(line + used, " %63[^=]=%lf%n", mode, &ips, &n) == 2; used += n) r.modes[mode] = ips;
  return r;
}

void TorchPeer::stop() {
  if (out_) {
    std::fputs("quit\n", out_);
    std::fclose(out_);
  }
  if (in_) std::fclose(in_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
  out_ = in_ = nullptr;
  pid_ = -1;
}

}  // namespace cnn::bench
