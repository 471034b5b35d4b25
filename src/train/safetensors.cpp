#include "src/train/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/base/error.h"
#include "src/base/half_bits.h"

namespace cnn {

namespace {

// The subset of JSON a safetensors header uses: objects, arrays, strings (escapes \" \\ \/ and \uXXXX of
// ASCII), integers; anything else under "__metadata__" is skipped as a string. Errors name the byte offset.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  std::vector<NamedTensor> tensors_with_offsets(std::vector<std::pair<uint64_t, uint64_t>>& offsets,
                                                std::vector<std::string>& dtypes) {
    std::vector<NamedTensor> out;
    expect('{');
    if (peek() == '}') return ++i_, out;
    do {
      const std::string name = string();
      expect(':');
      if (name == "__metadata__") {
        skip_value();
        continue;
      }
      NamedTensor t;
      t.name = name;
      std::string dtype;
      std::vector<uint64_t> off;
      expect('{');
      do {
        const std::string key = string();
        expect(':');
        if (key == "dtype") {
          dtype = string();
        } else if (key == "shape") {
          for (uint64_t d : int_array()) t.shape.push_back(static_cast<int64_t>(d));
        } else if (key == "data_offsets") {
          off = int_array();
        } else {
          skip_value();
        }
      } while (comma('}'));
      if (dtype.empty() || off.size() != 2)
        fail(strprintf("tensor '%s' lacks a dtype or its two data_offsets", name.c_str()));
      out.push_back(std::move(t));
      offsets.emplace_back(off[0], off[1]);
      dtypes.push_back(dtype);
    } while (comma('}'));
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    raise(kExitUsage, "safetensors file '%s': bad header at byte %zu: %s", origin_.c_str(), i_, what.c_str());
  }
  char peek() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_])) ++i_;
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(strprintf("expected '%c'", c));
    ++i_;
  }
  // After an element: true on ',', false on `close` (consumed).
  bool comma(char close) {
    const char c = peek();
    ++i_;
    if (c == ',') return true;
    if (c != close) fail(strprintf("expected ',' or '%c'", close));
    return false;
  }
  std::string string() {
    expect('"');
    std::string v;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return v;
      if (c != '\\') {
        v += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      if (e == 'u') {
        if (i_ + 4 > s_.size()) fail("short \\u escape");
        const unsigned long u = std::stoul(s_.substr(i_, 4), nullptr, 16);
        i_ += 4;
        v += u < 128 ? static_cast<char>(u) : '?';  // tensor names are ASCII; others only need to stay distinct
      } else {
        v += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
    }
  }
  std::vector<uint64_t> int_array() {
    std::vector<uint64_t> v;
    expect('[');
    if (peek() == ']') return ++i_, v;
    do {
      peek();
      size_t end = i_;
      while (end < s_.size() && s_[end] >= '0' && s_[end] <= '9') ++end;
      if (end == i_ || end - i_ > 19) fail("expected a non-negative integer");
      v.push_back(std::stoull(s_.substr(i_, end - i_)));
      i_ = end;
    } while (comma(']'));
    return v;
  }
  // `depth`: how deep in skipped arrays/objects; bounded so that a hostile header cannot exhaust the stack.
  void skip_value(int depth = 0) {
    if (depth > 64) fail("values nested more than 64 deep");
    const char c = peek();
    if (c == '"') {
      string();
    } else if (c == '{' || c == '[') {
      ++i_;
      const char close = c == '{' ? '}' : ']';
      if (peek() == close) return void(++i_);
      do {
        if (close == '}') {
          string();
          expect(':');
        }
        skip_value(depth + 1);
      } while (comma(close));
    } else {
      while (i_ < s_.size() && !std::strchr(",}] \t\r\n", s_[i_])) ++i_;
    }
  }

  const std::string& s_;
  const std::string& origin_;
  size_t i_ = 0;
};

size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

bool is_read(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

float decode(const std::string& dtype, const unsigned char* p) {
  if (dtype == "F32") {
    uint32_t u = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const uint16_t h = static_cast<uint16_t>(p[0] | p[1] << 8);
  return dtype == "F16" ? simt::detail::half_bits_to_float(h) : simt::detail::bf16_bits_to_float(h);
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& origin) {
  SafetensorsFile out;
  if (bytes.size() < 8)
    raise(kExitUsage, "safetensors file '%s': %zu bytes, shorter than the 8-byte header length", origin.c_str(),
          bytes.size());
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | static_cast<unsigned char>(bytes[k]);
  if (n > bytes.size() - 8)
    raise(kExitUsage, "safetensors file '%s': header length %llu exceeds the file (%zu bytes): truncated or not "
          "safetensors", origin.c_str(), (unsigned long long)n, bytes.size());
  const std::string header = bytes.substr(8, n);
  const size_t data_begin = 8 + n, data_size = bytes.size() - data_begin;
  std::vector<std::pair<uint64_t, uint64_t>> offsets;
  std::vector<std::string> dtypes;
  std::vector<NamedTensor> ts = HeaderParser(header, origin).tensors_with_offsets(offsets, dtypes);
  for (size_t k = 0; k < ts.size(); ++k) {
    NamedTensor& t = ts[k];
    const size_t esize = dtype_bytes(dtypes[k]);
    if (!esize)
      raise(kExitUsage, "safetensors file '%s': tensor '%s' has dtype %s, not one of the format's types",
            origin.c_str(), t.name.c_str(), dtypes[k].c_str());
    uint64_t count = 1;
    for (int64_t d : t.shape) {
      if (d > (int64_t(1) << 40) || count > (uint64_t(1) << 40)) count = UINT64_MAX;
      else count *= static_cast<uint64_t>(d);
    }
    const auto [b, e] = offsets[k];
    if (b > e || e > data_size || count == UINT64_MAX || e - b != count * esize)
      raise(kExitUsage, "safetensors file '%s': tensor '%s' has data_offsets [%llu, %llu] but %llu elements of "
            "%s and %zu data bytes: a damaged file", origin.c_str(), t.name.c_str(), (unsigned long long)b,
            (unsigned long long)e, (unsigned long long)count, dtypes[k].c_str(), data_size);
    if (!is_read(dtypes[k])) {
      out.skipped.push_back(t.name + " (" + dtypes[k] + ")");
      continue;
    }
    t.data.resize(count);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + data_begin + b);
    for (uint64_t i = 0; i < count; ++i) t.data[i] = decode(dtypes[k], p + i * esize);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) raise(kExitUsage, "cannot open safetensors file '%s': %s", path.c_str(), std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_safetensors(ss.str(), path);
}

bool is_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = f ? static_cast<std::streamoff>(f.tellg()) : 0;
  unsigned char head[9] = {};
  if (size < 9 || !f.seekg(0).read(reinterpret_cast<char*>(head), sizeof head)) return false;
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | head[k];
  return n >= 2 && n <= static_cast<uint64_t>(size) - 8 && head[8] == '{';
}

}  // namespace cnn
