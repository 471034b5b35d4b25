#include "io/lmdb_meta.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/base/error.h"

namespace cnn {

bool read_lmdb_meta(const std::string& meta_path, LmdbMeta* out) {
  std::ifstream in(meta_path);
  if (!in) return false;
  *out = LmdbMeta();
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string item;
    ss >> item;
    bool ok = true;
    if (item == "num_classes") {
      ok = static_cast<bool>(ss >> out->num_classes) && out->num_classes > 0;
    } else if (item == "mean" || item == "std") {
      auto& v = item == "mean" ? out->mean : out->std;
      v.clear();
      float x;
      while (ss >> x) v.push_back(x);
      ok = !v.empty() && ss.eof();
    } else if (item == "class_name") {
      std::string name;
      std::getline(ss >> std::ws, name);
      out->class_names.push_back(name);
    } else {
      ok = false;
    }
    if (!ok)
      raise(kExitData, "%s:%d: cannot parse '%s'; expected 'num_classes N', 'mean v...', 'std v...' or "
            "'class_name NAME' (fix or delete the file)", meta_path.c_str(), lineno, line.c_str());
  }
  return true;
}

void write_lmdb_meta(const std::string& meta_path, const LmdbMeta& meta) {
  std::ofstream out(meta_path);
  if (!out) raise(kExitData, "cannot write %s: %s", meta_path.c_str(), std::strerror(errno));
  out << "# cnntrain dataset metadata (see io/lmdb_meta.h); Caffe ignores this file\n";
  if (meta.num_classes > 0) out << "num_classes " << meta.num_classes << "\n";
  auto put = [&](const char* name, const std::vector<float>& v) {
    if (v.empty()) return;
    out << name;
    for (float x : v) out << " " << x;
    out << "\n";
  };
  out.precision(9);
  put("mean", meta.mean);
  put("std", meta.std);
  for (const auto& n : meta.class_names) out << "class_name " << n << "\n";
  if (!out.flush()) raise(kExitData, "cannot write %s: %s", meta_path.c_str(), std::strerror(errno));
}

}  // namespace cnn
