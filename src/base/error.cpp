#include "src/base/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>


namespace cnn {

namespace {
std::mutex g_log_mu;
std::string g_log_path;
bool g_have_identity = false;
int g_rank = 0, g_size = 1;
std::string g_host;

[[noreturn]] void exit_now(int code) {
  std::fflush(nullptr);
  _exit(code);  // another thread may be inside a library: leave without running destructors
}
AbortHandler g_abort = exit_now;
}  // namespace

std::string vstrprintf(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap2);
  va_end(ap2);
  std::string s(n > 0 ? n : 0, '\0');
  if (n > 0) std::vsnprintf(&s[0], n + 1, fmt, ap);
  return s;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  return s;
}

void raise(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  throw Error(code, s);
}

void set_error_log_path(const std::string& path) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_log_path = path;
}

void set_process_identity(int rank, int size, const std::string& host) {
  g_rank = rank;
  g_size = size;
  g_host = host;
  g_have_identity = true;
}

void clear_process_identity() { g_have_identity = false; }

void set_abort_handler(AbortHandler handler) { g_abort = handler ? handler : exit_now; }

bool is_log_rank() { return !g_have_identity || g_rank == 0; }

std::string rank_tag() {
  if (!g_have_identity) return "";
  return strprintf("[rank %d/%d on %s]", g_rank, g_size, g_host.c_str());
}

void report_error(const std::string& msg) {
  std::string tag = rank_tag();
  std::string line = "cnntrain: error" + (tag.empty() ? "" : " " + tag) + ": " + msg + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  {
    std::lock_guard<std::mutex> lk(g_log_mu);
    if (!g_log_path.empty()) {
      // O_APPEND keeps lines from several ranks whole; the log is best effort on the way down.
      int fd = ::open(g_log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
      if (fd >= 0) {
        ssize_t w = ::write(fd, line.data(), line.size());
        (void)w;
        ::close(fd);
      }
    }
  }
}

void fatal(int code, const std::string& msg) {
  report_error(msg);
  g_abort(code);
  exit_now(code);  // a handler that returned
}

void check_failed(const char* expr, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string detail = vstrprintf(fmt, ap);
  va_end(ap);
  fatal(kExitFailure, strprintf("internal check failed: %s at %s:%d: %s", expr, file, line, detail.c_str()));
}

}  // namespace cnn
