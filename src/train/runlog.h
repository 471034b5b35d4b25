// The run's human log (stdout + log.txt) and machine log (metrics.jsonl, schema in docs/run_directory.md). Only rank 0
// writes; other ranks' calls are no-ops, so callers need not test the rank.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace cnn {

// One JSON object built field by field (fields keep their insertion order).
class Json {
 public:
  Json& add(const char* key, const std::string& v);
  Json& add(const char* key, const char* v) { return add(key, std::string(v)); }
  Json& add(const char* key, double v);
  Json& add(const char* key, int64_t v);
  Json& add(const char* key, int v) { return add(key, static_cast<int64_t>(v)); }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const char* k);
  std::string body_;
};

std::string json_escape(const std::string& s);

class RunLog {
 public:
  RunLog() = default;
  ~RunLog();
  // Opens log.txt and metrics.jsonl (append) in `dir` when `writer` is true.
  void open(const std::string& dir, bool writer);
  void info(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void warn(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void event(const Json& j);

 private:
  void line(const char* level, const std::string& msg);
  bool writer_ = false;
  FILE* log_ = nullptr;
  FILE* metrics_ = nullptr;
};

}  // namespace cnn
