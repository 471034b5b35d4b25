#include "src/obs/progress.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "src/base/error.h"

namespace cnn {

namespace {

// Whether the parent process is an MPI launcher or its daemon (which relays our output elsewhere).
bool parent_is_launcher() {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(getppid()) + "/comm").c_str(), "r");
  if (!f) return false;
  char name[64] = {0};
  const bool ok = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  if (!ok) return false;
  const std::string n(name, std::strcspn(name, "\n"));
  return n == "mpirun" || n == "mpiexec" || n == "orterun" || n == "orted" || n == "prterun" || n == "prted" ||
         n == "hydra_pmi_proxy" || n == "srun" || n == "slurmstepd";
}

// A terminal device: the pty slaves (/dev/pts/*, majors 136-143), virtual consoles and /dev/tty.
bool parent_stdout_is_terminal() {
  struct stat st;
  const std::string fd1 = "/proc/" + std::to_string(getppid()) + "/fd/1";
  if (::stat(fd1.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  const unsigned m = major(st.st_rdev);
  return (m >= 136 && m <= 143) || m == 4 || m == 5;
}

}  // namespace

bool progress_bar_wanted(const std::string& mode) {
  if (mode == "bar") return true;
  if (mode == "lines" || !isatty(STDOUT_FILENO)) return false;
  return !parent_is_launcher() || parent_stdout_is_terminal();
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long long t = std::llround(s);
  if (t >= 3600) return strprintf("%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  return strprintf("%lld:%02lld", t / 60, t % 60);
}

Progress::Progress(RunLog& log, bool bar, int64_t start, int64_t total, int64_t spe)
    : log_(log), bar_(bar), start_(start), total_(total), spe_(spe > 0 ? spe : 1) {}

Eta Progress::eta(int64_t done) const {
  Eta e;
  e.elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
  const int64_t ran = done - start_;
  const double per_step = ran > 0 ? e.elapsed / ran : NAN;
  const int64_t epoch_end = std::min(total_, (done + spe_ - 1) / spe_ * spe_);
  e.epoch = per_step * static_cast<double>(epoch_end - done);
  e.run = per_step * static_cast<double>(total_ - done);
  return e;
}

void Progress::on_step(int64_t done, double last_loss) {
  if (!bar_) return;
  const Clock::time_point now = Clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  const Eta e = eta(done);
  const int64_t epoch = (done - 1) / spe_ + 1, in_epoch = (done - 1) % spe_ + 1;
  constexpr int kWidth = 24;
  const int fill = static_cast<int>(kWidth * in_epoch / spe_);
  std::string bar = std::string(fill, '#') + std::string(kWidth - fill, '.');
  log_.set_status(strprintf("epoch %lld [%s] %lld/%lld  loss %.4f  elapsed %s  ETA epoch %s, run %s",
                            (long long)epoch, bar.c_str(), (long long)in_epoch, (long long)spe_, last_loss,
                            format_duration(e.elapsed).c_str(), format_duration(e.epoch).c_str(),
                            format_duration(e.run).c_str()));
}

void Progress::finish() {
  if (bar_) log_.set_status("");
}

}  // namespace cnn

