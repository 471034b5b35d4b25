#include "src/checkpoint/model_info.h"

#include <cstdio>
#include <cstdlib>

#include "io/h5_util.h"
#include "src/base/error.h"

namespace cnn {

static_assert(sizeof(hid_t) == sizeof(int64_t), "model_info.h passes HDF5 identifiers as int64_t");

namespace {

std::string join_numbers(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += (s.empty() ? "" : ",") + strprintf("%.9g", x);
  return s;
}

std::vector<double> split_numbers(const std::string& s) {
  std::vector<double> v;
  for (size_t a = 0; a < s.size();) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    v.push_back(std::strtod(s.substr(a, b - a).c_str(), nullptr));
    a = b + 1;
  }
  return v;
}

}  // namespace

ModelInfo model_info_of(const DatasetInfo& train, int height, int width, int channels) {
  ModelInfo m;
  m.num_classes = train.num_classes;
  m.class_names = train.class_names;
  m.mean.assign(train.mean.begin(), train.mean.end());
  m.std.assign(train.std.begin(), train.std.end());
  m.height = height, m.width = width, m.channels = channels;
  return m;
}

void write_model_info(int64_t file, const ModelInfo& info) {
  if (info.num_classes > 0) h5_write_attr_ints(file, "num_classes", {info.num_classes});
  if (!info.class_names.empty()) h5_write_attr_strings(file, "class_names", info.class_names);
  if (info.has_stats()) {
    h5_write_attr_floats(file, "mean", info.mean);
    h5_write_attr_floats(file, "std", info.std);
  }
  if (info.has_input_size()) h5_write_attr_ints(file, "input_size", {info.height, info.width, info.channels});
}

ModelInfo read_model_info(int64_t file) {
  ModelInfo m;
  std::vector<long long> classes;
  if (h5_read_attr_ints(file, "num_classes", classes) && classes.size() == 1)
    m.num_classes = static_cast<int>(classes[0]);
  h5_read_attr_strings(file, "class_names", m.class_names);
  std::vector<double> mean, sd;
  if (h5_read_attr_floats(file, "mean", mean) && h5_read_attr_floats(file, "std", sd) && mean.size() == sd.size())
    m.mean = mean, m.std = sd;
  std::vector<long long> size;
  if (h5_read_attr_ints(file, "input_size", size) && size.size() == 3)
    m.height = static_cast<int>(size[0]), m.width = static_cast<int>(size[1]), m.channels = static_cast<int>(size[2]);
  return m;
}

std::map<std::string, std::string> model_info_props(const ModelInfo& info) {
  std::map<std::string, std::string> p;
  if (info.num_classes > 0) p["num_classes"] = std::to_string(info.num_classes);
  if (!info.class_names.empty()) {
    std::string s;
    for (size_t i = 0; i < info.class_names.size(); ++i) {
      if (i) s += ",";
      for (char c : info.class_names[i]) s += c == ',' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    }
    p["class_names"] = s;
  }
  if (info.has_stats()) {
    p["mean"] = join_numbers(info.mean);
    p["std"] = join_numbers(info.std);
  }
  if (info.has_input_size()) p["input_size"] = strprintf("%dx%dx%d", info.height, info.width, info.channels);
  return p;
}

ModelInfo model_info_from_props(const std::map<std::string, std::string>& props) {
  ModelInfo m;
  auto n = props.find("num_classes");
  if (n != props.end()) m.num_classes = std::atoi(n->second.c_str());
  auto it = props.find("class_names");
  if (it != props.end()) {
    std::string cur;
    for (size_t i = 0; i < it->second.size(); ++i) {
      const char c = it->second[i];
      if (c == '\\' && i + 1 < it->second.size()) {
        cur += it->second[++i];
      } else if (c == ',') {
        m.class_names.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    m.class_names.push_back(cur);
  }
  auto mean = props.find("mean"), sd = props.find("std");
  if (mean != props.end() && sd != props.end()) {
    m.mean = split_numbers(mean->second);
    m.std = split_numbers(sd->second);
  }
  auto size = props.find("input_size");
  if (size != props.end() && std::sscanf(size->second.c_str(), "%dx%dx%d", &m.height, &m.width, &m.channels) != 3)
    m.height = m.width = m.channels = 0;
  return m;
}

}  // namespace cnn
