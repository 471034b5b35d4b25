// The run's human log (stdout + log.txt) and machine log (metrics.jsonl: schema in docs/run_directory.md, the
// observability events in docs/observability.md). Only rank 0 writes; other ranks' calls are no-ops, so callers need
// not test the rank.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cnn {

// One JSON object built field by field (fields keep their insertion order). Numbers are written in the
// shortest form that reads back as the same double, so a reader of metrics.jsonl sees the exact values.
// The numeric fields are also kept as values for other sinks (TensorBoard).
class Json {
 public:
  Json& add(const char* key, const std::string& v);
  Json& add(const char* key, const char* v) { return add(key, std::string(v)); }
  Json& add(const char* key, double v);
  Json& add(const char* key, int64_t v);
  Json& add(const char* key, int v) { return add(key, static_cast<int64_t>(v)); }
  Json& add(const char* key, const std::vector<double>& v);
  Json& add(const char* key, const std::vector<int64_t>& v);
  Json& add(const char* key, const std::vector<std::string>& v);
  std::string str() const { return "{" + body_ + "}"; }

  const std::string& event() const { return event_; }
  // Numeric fields, and numeric array fields, in insertion order (non-finite values included).
  const std::vector<std::pair<std::string, double>>& numbers() const { return numbers_; }
  const std::vector<std::pair<std::string, std::vector<double>>>& arrays() const { return arrays_; }

 private:
  void key(const char* k);
  std::string body_, event_;
  std::vector<std::pair<std::string, double>> numbers_;
  std::vector<std::pair<std::string, std::vector<double>>> arrays_;
};

std::string json_escape(const std::string& s);
// The shortest decimal form that parses back to v exactly ("null" when v is not finite).
std::string json_number(double v);

class RunLog {
 public:
  RunLog() = default;
  ~RunLog();
  // Opens log.txt and metrics.jsonl (append) in `dir` when `writer` is true.
  void open(const std::string& dir, bool writer);
  void info(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void warn(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void event(const Json& j);
  // Also hands every event to `sink` (e.g. the TensorBoard writer), after metrics.jsonl has it.
  void set_event_sink(std::function<void(const Json&)> sink) { sink_ = std::move(sink); }
  // A live status line at the bottom of a terminal (rewritten in place with \r; log lines print above it).
  // Only for a terminal: callers decide (src/obs/progress.h). Empty clears it.
  void set_status(const std::string& s);

 private:
  void line(const char* level, const std::string& msg);
  void clear_status();
  bool writer_ = false;
  FILE* log_ = nullptr;
  FILE* metrics_ = nullptr;
  std::function<void(const Json&)> sink_;
  std::string status_;
};

}  // namespace cnn
