// Small helpers shared by the benchmark programs.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cnn::bench {

// Median of v (the mean of the middle two for an even count; 0 when empty).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The 1, 5 and 15 minute load averages of /proc/loadavg, printed beside figures taken on a shared machine.
inline std::string load_average() {
  char buf[128] = "?";
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  return s.substr(0, s.find(' ', s.find(' ', s.find(' ') + 1) + 1));
}

// The CPU the figures were taken on, from /proc/cpuinfo: "<model name> (family F model M), N online CPUs".
// Shared VMs change CPUs between sessions; the ratios against PyTorch depend on which (docs/perf.md).
inline std::string cpu_description() {
  std::string name = "unknown CPU", family = "?", model = "?";
  int cpus = 0;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      const size_t colon = l.find(':');
      if (colon == std::string::npos) continue;
      std::string key = l.substr(0, l.find_last_not_of(" \t", colon - 1) + 1);
      std::string value = l.substr(std::min(l.size(), colon + 2));
      value = value.substr(0, value.find_last_not_of(" \n") + 1);
      if (key == "processor") ++cpus;
      if (cpus > 1) continue;  // the first CPU's fields
      if (key == "model name") name = value;
      if (key == "cpu family") family = value;
      if (key == "model") model = value;
    }
    std::fclose(f);
  }
  return name + " (family " + family + " model " + model + "), " + std::to_string(cpus) + " online CPUs";
}

// The non-empty items of a comma-separated list ("a,b,,c" -> a, b, c).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (size_t a = 0, b; a <= s.size(); a = b + 1) {
    b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
  }
  return out;
}

// The benchmark's name for its messages (program_invocation_short_name, e.g. "train_bench").
inline const char* program_name() { return program_invocation_short_name; }

// An option's number, within [lo, hi]; anything else is a usage error naming the option (exit 2).
inline double number_option(const std::string& opt, const std::string& v, double lo, double hi, bool whole) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= lo && x <= hi) || (whole && x != static_cast<long long>(x))) {
    std::fprintf(stderr, "%s: %s: bad value '%s': expected %s from %.15g to %.15g\n", program_name(),
                 opt.c_str(), v.c_str(), whole ? "a whole number" : "a number", lo, hi);
    std::exit(2);
  }
  return x;
}
inline int int_option(const std::string& opt, const std::string& v, int lo) {
  return static_cast<int>(number_option(opt, v, lo, 1 << 20, true));
}
inline std::vector<std::string> list_option(const std::string& opt, const std::string& v) {
  std::vector<std::string> items = split_list(v);
  if (items.empty()) {
    std::fprintf(stderr, "%s: %s: bad value '%s': expected a comma-separated list\n", program_name(), opt.c_str(),
                 v.c_str());
    std::exit(2);
  }
  return items;
}

}  // namespace cnn::bench
