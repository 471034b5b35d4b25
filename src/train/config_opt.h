// Internal to the configuration (src/train/config*.cpp): an option as a name, help, setter and getter on a
// Config, and the helpers that make the typed ones. config.cpp holds the option machinery and the options
// without a section; config_sections.cpp the tables of the INI sections.
#pragma once
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/train/config.h"

namespace cnn::config_detail {

struct Opt {
  std::string name, help;
  std::function<void(Config&, const std::string&)> set;
  std::function<std::string(const Config&)> get;
  std::vector<std::string> choices = {};  // listed by --help
  // Says how this invocation runs, not what the run is (run directory, resume, where to stop): config.ini
  // carries these only as comments, so that `--config RUN_DIR/config.ini` repeats the run elsewhere.
  bool invocation = false;
};

[[noreturn]] inline void bad(const std::string& name, const std::string& val, const std::string& why) {
  raise(kExitUsage, "option --%s: bad value '%s': %s", name.c_str(), val.c_str(), why.c_str());
}

inline long long to_int(const std::string& name, const std::string& v, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) bad(name, v, "expected an integer");
  if (x < lo || x > hi) bad(name, v, strprintf("must be between %lld and %lld", lo, hi));
  return x;
}

inline double to_real(const std::string& name, const std::string& v, double lo, double hi, bool lo_open) {
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x)) bad(name, v, "expected a number");
  if (x < lo || x > hi || (lo_open && x == lo))
    bad(name, v, strprintf("must be %s %g and at most %g", lo_open ? "greater than" : "at least", lo, hi));
  return x;
}

// The shortest %g-style form that reads back as the same double: 0.1 stays "0.1" and 5e-4 "0.0005".
inline std::string fmt_real(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general);
  return std::string(buf, r.ptr);
}

// Where an option's value lives in a Config: a member of it, or a member of one of its section structs.
template <class T>
struct Field {
  std::function<T&(Config&)> ref;
  std::function<const T&(const Config&)> get;
};

template <class T>
Field<T> field(T Config::*member) {
  return {[=](Config& c) -> T& { return c.*member; }, [=](const Config& c) -> const T& { return c.*member; }};
}

template <class S, class T>
Field<T> field(S Config::*section, T S::*member) {
  return {[=](Config& c) -> T& { return (c.*section).*member; },
          [=](const Config& c) -> const T& { return (c.*section).*member; }};
}

inline Opt invocation(Opt o) {
  o.invocation = true;
  return o;
}

template <class T>
Opt int_opt(const char* name, Field<T> f, long long lo, long long hi, const char* help) {
  return {name, help, [=](Config& c, const std::string& v) { f.ref(c) = static_cast<T>(to_int(name, v, lo, hi)); },
          [=](const Config& c) { return std::to_string(f.get(c)); }};
}

inline Opt real_opt(const char* name, Field<double> f, double lo, double hi, bool lo_open, const char* help) {
  return {name, help, [=](Config& c, const std::string& v) { f.ref(c) = to_real(name, v, lo, hi, lo_open); },
          [=](const Config& c) { return fmt_real(f.get(c)); }};
}

inline Opt range_opt(const char* name, Field<std::string> f, const char* help) {  // "MIN,MAX" (parse_range), as written
  return {name, help, [=](Config& c, const std::string& v) { parse_range(name, v), f.ref(c) = v; },
          [=](const Config& c) { return f.get(c); }};
}

inline Opt str_opt(const char* name, Field<std::string> f, std::vector<std::string> choices, const char* help) {
  return {name, help,
          [=](Config& c, const std::string& v) {
            if (!choices.empty()) {
              bool ok = false;
              std::string all;
              for (const auto& ch : choices) {
                ok = ok || ch == v;
                all += (all.empty() ? "" : ", ") + ch;
              }
              if (!ok) bad(name, v, "choose one of: " + all);
            }
            f.ref(c) = v;
          },
          [=](const Config& c) { return f.get(c); }, choices};
}

inline Opt bool_opt(const char* name, Field<bool> f, const char* help) {
  return {name, help,
          [=](Config& c, const std::string& v) {
            if (v == "true" || v == "1" || v == "yes" || v == "on") f.ref(c) = true;
            else if (v == "false" || v == "0" || v == "no" || v == "off") f.ref(c) = false;
            else bad(name, v, "expected true or false");
          },
          [=](const Config& c) { return std::string(f.get(c) ? "true" : "false"); }};
}

// The tables of the INI sections (config_sections.cpp), in the order --help lists them.
std::vector<Opt> init_options();
std::vector<Opt> data_options();
std::vector<Opt> conv_options();
std::vector<Opt> cudnn_options();
std::vector<Opt> gpu_options();
std::vector<Opt> train_options();
std::vector<Opt> checkpoint_options();
std::vector<Opt> bn_options();
std::vector<Opt> comm_options();
std::vector<Opt> augment_options();
std::vector<Opt> eval_options();
std::vector<Opt> log_options();
std::vector<Opt> amp_options();

}  // namespace cnn::config_detail
