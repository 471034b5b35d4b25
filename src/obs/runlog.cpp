#include "src/obs/runlog.h"

#include <cerrno>
#include <charconv>
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

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void Json::key(const char* k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(k) + "\":";
}

Json& Json::add(const char* k, const std::string& v) {
  key(k);
  body_ += "\"" + json_escape(v) + "\"";
  if (std::strcmp(k, "event") == 0) event_ = v;
  return *this;
}

Json& Json::add(const char* k, double v) {
  key(k);
  body_ += json_number(v);
  numbers_.emplace_back(k, v);
  return *this;
}

Json& Json::add(const char* k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  numbers_.emplace_back(k, static_cast<double>(v));
  return *this;
}

Json& Json::add(const char* k, const std::vector<double>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) body_ += (i ? "," : "") + json_number(v[i]);
  body_ += "]";
  arrays_.emplace_back(k, v);
  return *this;
}

Json& Json::add(const char* k, const std::vector<int64_t>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) body_ += (i ? "," : "") + std::to_string(v[i]);
  body_ += "]";
  arrays_.emplace_back(k, std::vector<double>(v.begin(), v.end()));
  return *this;
}

Json& Json::add(const char* k, const std::vector<std::string>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) body_ += (i ? ",\"" : "\"") + json_escape(v[i]) + "\"";
  body_ += "]";
  return *this;
}

RunLog::~RunLog() {
  clear_status();
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

void RunLog::clear_status() {
  if (status_.empty()) return;
  std::fputs("\r\033[K", stdout);
  std::fflush(stdout);
}

void RunLog::set_status(const std::string& s) {
  if (!writer_) return;
  clear_status();
  status_ = s;
  if (status_.empty()) return;
  std::fputs(status_.c_str(), stdout);
  std::fflush(stdout);
}

void RunLog::line(const char* level, const std::string& msg) {
  if (!writer_) return;
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  std::FILE* out = std::strcmp(level, "warning") == 0 ? stderr : stdout;
  clear_status();
  std::fprintf(out, "%s%s%s\n", level[0] == 'i' ? "" : level, level[0] == 'i' ? "" : ": ", msg.c_str());
  std::fflush(out);
  if (!status_.empty()) {
    std::fputs(status_.c_str(), stdout);
    std::fflush(stdout);
  }
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
  if (sink_) sink_(j);
}

}  // namespace cnn
