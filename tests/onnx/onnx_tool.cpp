// What tests/onnx/torch_files.py compares with the onnx package: read_onnx's view of a file as JSON, and a
// file read and written again by write_onnx.
//   onnx_tool dump FILE.onnx OUT.json [--any-op]   (--any-op: read ops outside the supported table too)
//   onnx_tool rewrite IN.onnx OUT.onnx
// Exit codes as cnntrain's: 2 for a file read_onnx refuses, with its message on stderr.
#include <cstdio>
#include <fstream>
#include <string>

#include "src/base/error.h"
#include "src/model/onnx/onnx_model.h"

namespace {

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

template <typename T, typename F>
std::string list(const std::vector<T>& v, F item) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + item(v[i]);
  return s + "]";
}

std::string num(int64_t v) { return std::to_string(v); }
std::string num(float v) { return cnn::strprintf("%.9g", v); }

std::string tensors(const std::vector<cnn::OnnxTensor>& ts) {
  std::string s = "{";
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    s += (i ? "," : "") + quoted(t.name) + ":{\"dims\":" + list(t.dims, [](int64_t d) { return num(d); }) +
         ",\"type\":" + num(int64_t{t.source_type}) + ",\"values\":" +
         (t.is_float() ? list(t.floats, [](float v) { return num(v); })
                       : list(t.ints, [](int64_t v) { return num(v); })) + "}";
  }
  return s + "}";
}

std::string dump(const cnn::OnnxModel& m) {
  auto strings = [](const std::vector<std::string>& v) { return list(v, quoted); };
  auto values = [](const cnn::OnnxValueInfo& v) {
    return "{\"name\":" + quoted(v.name) + ",\"dims\":" + list(v.dims, [](int64_t d) { return num(d); }) + "}";
  };
  auto node = [&](const cnn::OnnxNode& n) {
    return "{\"op\":" + quoted(n.op_type) + ",\"name\":" + quoted(n.name) + ",\"inputs\":" + strings(n.inputs) +
           ",\"outputs\":" + strings(n.outputs) + ",\"attrs\":" + num(int64_t(n.attrs.size())) + "}";
  };
  return "{\"opset\":" + num(m.opset) + ",\"inputs\":" + list(m.inputs, values) + ",\"outputs\":" +
         list(m.outputs, values) + ",\"nodes\":" + list(m.nodes, node) + ",\"initializers\":" +
         tensors(m.initializers) + ",\"constants\":" + tensors(m.constants) + ",\"info\":" +
         quoted(cnn::describe_onnx(m)) + "}\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (argc < 4 || (cmd != "dump" && cmd != "rewrite")) {
    std::fprintf(stderr, "usage: onnx_tool dump FILE.onnx OUT.json [--any-op] | rewrite IN.onnx OUT.onnx\n");
    return 2;
  }
  try {
    if (cmd == "rewrite") {
      cnn::OnnxModel m = cnn::read_onnx(argv[2]);
      m.opset = cnn::kOnnxWriteOpset;
      cnn::write_onnx(m, argv[3]);
      return 0;
    }
    const bool any_op = argc > 4 && std::string(argv[4]) == "--any-op";
    const cnn::OnnxModel m = any_op ? cnn::read_onnx(argv[2], {}) : cnn::read_onnx(argv[2]);
    std::ofstream(argv[3]) << dump(m);
    return 0;
  } catch (const cnn::Error& e) {
    std::fprintf(stderr, "onnx_tool: error: %s\n", e.what());
    return e.code();
  }
}
