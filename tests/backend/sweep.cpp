#include "tests/backend/sweep.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace cnn::sweep {

// kernels/backend.h's text (generated at build time: tests/backend/backend.mk).
extern const char kBackendHeader[];

Run::~Run() {
  be.synchronize();
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) be.release(*it);
}

float* Run::garbage(size_t n) {
  return upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

std::vector<double> mask_bits(Run& r, const uint32_t* d_mask, size_t n) {
  const auto words = r.download(d_mask, relu_mask_words(n));
  std::vector<double> bits(n);
  for (size_t i = 0; i < n; ++i) bits[i] = words[i / 32] >> (i % 32) & 1u;
  return bits;
}

std::vector<float> bn_input(int rows, int c, uint64_t seed) {
  auto x = random_vec(static_cast<size_t>(rows) * c, seed);
  for (size_t i = 0; i < x.size(); ++i) x[i] += 5.f * static_cast<float>(i % c);
  return x;
}

double bn_y_atol(int rows, int c, const std::vector<float>& x, const std::vector<float>& gamma,
                 const std::vector<float>& beta, float eps, double floor) {
  double atol = floor;
  for (int j = 0; j < c; ++j) {
    double sum = 0, sq = 0, big = 0;
    for (int i = 0; i < rows; ++i) sum += x[static_cast<size_t>(i) * c + j];
    const double mean = sum / rows;
    for (int i = 0; i < rows; ++i) {
      const double v = x[static_cast<size_t>(i) * c + j];
      sq += (v - mean) * (v - mean);
      big = std::max(big, std::fabs(v));
    }
    const double scale = std::fabs(gamma[j]) / std::sqrt(sq / rows + eps);
    atol = std::max(atol, (scale * big + std::fabs(beta[j]) + scale * std::fabs(mean)) * std::ldexp(1.0, -23));
  }
  return atol;
}

void Run::output(const std::string& name, const float* d, size_t n, Tol tol) {
  auto h = download(d, n);
  outputs.push_back({name, std::vector<double>(h.begin(), h.end()), tol});
}

void Run::output(const std::string& name, const int32_t* d, size_t n) {
  auto h = download(d, n);
  outputs.push_back({name, std::vector<double>(h.begin(), h.end()), kExact});
}

void Run::output(const std::string& name, const uint8_t* d, size_t n) {
  auto h = download(d, n);
  outputs.push_back({name, std::vector<double>(h.begin(), h.end()), kExact});
}

void Run::output(const std::string& name, DType t, const void* d, size_t n, Tol tol) {
  auto h = download(static_cast<const uint16_t*>(d), n);
  std::vector<float> wide(n);
  convert_range(t, h.data(), DType::kF32, wide.data(), 0, n);
  outputs.push_back({name, std::vector<double>(wide.begin(), wide.end()), tol});
}

void Run::output_host(const std::string& name, std::vector<double> values, Tol tol) {
  outputs.push_back({name, std::move(values), tol});
}

namespace {
std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

// Blanks out // and /* */ comments (keeping line structure irrelevant: only tokens matter here).
std::string strip_comments(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      out += ' ';
    } else {
      out += s[i++];
    }
  }
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// True when `word` starts at i as a whole token.
bool token_at(const std::string& s, size_t i, const std::string& word) {
  return s.compare(i, word.size(), word) == 0 && (i == 0 || !ident_char(s[i - 1])) &&
         (i + word.size() >= s.size() || !ident_char(s[i + word.size()]));
}
}  // namespace

void add_case(Case c) { registry().push_back(std::move(c)); }
const std::vector<Case>& all_cases() { return registry(); }

std::vector<std::string> parse_virtual_methods(const std::string& header, const std::string& class_name) {
  const std::string s = strip_comments(header);
  // The class definition: "class NAME" followed (after an optional base clause) by '{'.
  size_t body = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!token_at(s, i, "class")) continue;
    size_t j = i + 5;
    while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (!token_at(s, j, class_name)) continue;
    size_t brace = s.find_first_of("{;", j);
    if (brace != std::string::npos && s[brace] == '{') {
      body = brace;
      break;
    }
  }
  std::vector<std::string> names;
  if (body == std::string::npos) return names;
  int depth = 0;
  for (size_t i = body; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) break;
    if (depth != 1 || !token_at(s, i, "virtual")) continue;
    // The method's name is the identifier right before the first '(' of the declaration.
    size_t paren = s.find('(', i);
    if (paren == std::string::npos) break;
    size_t end = paren;
    while (end > i && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
    size_t begin = end;
    while (begin > i && (ident_char(s[begin - 1]) || s[begin - 1] == '~')) --begin;
    std::string name = s.substr(begin, end - begin);
    if (!name.empty() && name[0] != '~') names.push_back(name);
    i = paren;
  }
  return names;
}

std::vector<std::string> backend_ops() { return parse_virtual_methods(kBackendHeader, "Backend"); }

}  // namespace cnn::sweep
