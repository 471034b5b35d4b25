// Small helpers shared by the benchmark programs.
#pragma once
#include <algorithm>
#include <cstdio>
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

}  // namespace cnn::bench
