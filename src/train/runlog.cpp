#include "src/train/runlog.h"

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <ctime>

#include "src/base/error.h"

namespace cnn {

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (ch < 0x20) o += strprintf("\\u%04x", ch);
        else o += static_cast<char>(ch);
    }
  }
  return o;
}

void Json::key(const char* k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(k) + "\":";
}

Json& Json::add(const char* k, const std::string& v) {
  key(k);
  body_ += "\"" + json_escape(v) + "\"";
  return *this;
}

Json& Json::add(const char* k, double v) {
  key(k);
  body_ += std::isfinite(v) ? strprintf("%.8g", v) : std::string("null");
  return *this;
}

Json& Json::add(const char* k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

RunLog::~RunLog() {
  if (log_) std::fclose(log_);
  if (metrics_) std::fclose(metrics_);
}

void RunLog::open(const std::string& dir, bool writer) {
  writer_ = writer;
  if (!writer) return;
  std::string lp = dir + "/log.txt", mp = dir + "/metrics.jsonl";
  log_ = std::fopen(lp.c_str(), "a");
  metrics_ = std::fopen(mp.c_str(), "a");
  if (!log_ || !metrics_)
    raise(kExitUsage, "cannot write the run log in '%s': %s (check --run-dir)", dir.c_str(), std::strerror(errno));
}

void RunLog::line(const char* level, const std::string& msg) {
  if (!writer_) return;
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  std::FILE* out = std::strcmp(level, "warning") == 0 ? stderr : stdout;
  std::fprintf(out, "%s%s%s\n", level[0] == 'i' ? "" : level, level[0] == 'i' ? "" : ": ", msg.c_str());
  std::fflush(out);
  if (log_) {
    std::fprintf(log_, "%s %s %s\n", ts, level, msg.c_str());
    std::fflush(log_);
  }
}

void RunLog::info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  line("info", vstrprintf(fmt, ap));
  va_end(ap);
}

void RunLog::warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  line("warning", vstrprintf(fmt, ap));
  va_end(ap);
}

void RunLog::event(const Json& j) {
  if (!writer_ || !metrics_) return;
  std::fprintf(metrics_, "%s\n", j.str().c_str());
  std::fflush(metrics_);
}

}  // namespace cnn
