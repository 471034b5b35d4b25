// Robustness harness for the ONNX loader (src/model/onnx): parse_onnx on mutated models, built with
// AddressSanitizer + UBSan (src/model/onnx.mk). Passing means: no sanitizer report, no crash or hang, every
// refusal a cnn::Error with exit 2 (never a protobuf or std exception), and every accepted model written by
// write_onnx reads back to the same graph.
// The entry point is libFuzzer's, so `clang++ -fsanitize=fuzzer` builds it for open-ended runs (make
// fuzz-onnx-libfuzzer, starting from the seeds below); `make test` runs the built-in driver: seeds built here
// (valid models with every tensor encoding, Constant nodes and external data), mutated bytewise and
// structurally.
//   usage: fuzz_onnx [cases=20000] [seed=1]    or    fuzz_onnx seeds DIR   (writes the seed models into DIR)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/model/onnx/onnx_proto.h"

namespace {

std::string g_dir;  // holds w.bin, the external data file the seeds name
int failures = 0;

void fail(const char* what, const std::string& detail) {
  if (failures++ < 20) std::fprintf(stderr, "fuzz_onnx: %s: %s\n", what, detail.c_str());
}

// Whether read_onnx (with the supported-op table) accepted the bytes.
bool exercise(const std::string& bytes) {
  bool accepted = false;
  for (bool any_op : {false, true}) {
    try {
      const cnn::OnnxModel m = any_op ? cnn::parse_onnx(bytes, "fuzz.onnx", g_dir, {})
                                      : cnn::parse_onnx(bytes, "fuzz.onnx", g_dir);
      accepted = accepted || !any_op;
      if (any_op || m.opset > cnn::kOnnxWriteOpset) continue;
      std::string again;
      try {
        again = cnn::serialize_onnx(m);  // ONNX's checker may refuse a graph the reader took: exit 1
      } catch (const cnn::Error& e) {
        if (e.code() != cnn::kExitFailure) fail("write_onnx error with an unexpected code", e.what());
        continue;
      }
      const cnn::OnnxModel back = cnn::parse_onnx(again, "again.onnx", "");
      if (back.nodes.size() != m.nodes.size() || back.initializers.size() != m.initializers.size() ||
          back.constants.size() != m.constants.size())
        fail("write_onnx -> read_onnx changed the graph", m.path);
    } catch (const cnn::Error& e) {
      if (e.code() != cnn::kExitUsage) fail("error with an unexpected code", e.what());
    } catch (const std::exception& e) {
      fail("an exception other than cnn::Error", e.what());
    }
  }
  return accepted;
}

void set_up_dir() {
  if (!g_dir.empty()) return;
  char tmpl[] = "/tmp/cnntrain_fuzz_onnx_XXXXXX";
  g_dir = mkdtemp(tmpl);
  std::ofstream(g_dir + "/w.bin", std::ios::binary) << std::string(4096, '\x3f');
}

// --- seeds: small models the exporters could have written -------------------------------------------------

void add_init(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, int type, int bytes_per) {
  auto* t = g->add_initializer();
  t->set_name(name);
  int64_t n = 1;
  for (int64_t d : dims) t->add_dims(d), n *= d;
  t->set_data_type(type);
  std::string raw(static_cast<size_t>(n * bytes_per), '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i % 5 == 4 ? 0x3c : i * 13);
  t->set_raw_data(raw);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const char* op, std::vector<std::string> in, const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const auto& s : in) n->add_input(s);
  n->add_output(out);
  return n;
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
               std::vector<int64_t> dims) {
  auto* v = list->Add();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(1);
  for (int64_t d : dims) {
    if (d < 0) tt->mutable_shape()->add_dim()->set_dim_param("N");
    else tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
}

onnx::ModelProto base_model(int opset) {
  onnx::ModelProto p;
  p.set_ir_version(8);
  auto* o = p.add_opset_import();
  o->set_version(opset);
  add_value(p.mutable_graph()->mutable_input(), "x", {-1, 2, 4, 4});
  return p;
}

std::vector<std::string> seed_corpus() {
  std::vector<std::string> corpus;
  {  // conv + bn + relu6 (Clip with Constant bounds) + global pool + flatten + gemm; float32 raw data
    onnx::ModelProto p = base_model(17);
    auto* g = p.mutable_graph();
    add_init(g, "w", {3, 2, 3, 3}, 1, 4);
    for (const char* s : {"g", "b", "mu", "var"}) add_init(g, s, {3}, 1, 4);
    add_init(g, "fc.w", {5, 3}, 1, 4);
    auto* c = add_node(g, "Conv", {"x", "w"}, "c");
    auto* a = c->add_attribute();
    a->set_name("pads"), a->set_type(onnx::AttributeProto::INTS);
    for (int k = 0; k < 4; ++k) a->add_ints(1);
    add_node(g, "BatchNormalization", {"c", "g", "b", "mu", "var"}, "bn");
    auto* lo = add_node(g, "Constant", {}, "lo")->add_attribute();
    lo->set_name("value_float"), lo->set_type(onnx::AttributeProto::FLOAT), lo->set_f(0);
    auto* hi = add_node(g, "Constant", {}, "hi")->add_attribute();
    hi->set_name("value"), hi->set_type(onnx::AttributeProto::TENSOR);
    hi->mutable_t()->set_data_type(1), hi->mutable_t()->add_float_data(6);
    add_node(g, "Clip", {"bn", "lo", "hi"}, "r");
    add_node(g, "GlobalAveragePool", {"r"}, "gap");
    add_node(g, "Flatten", {"gap"}, "f");
    auto* gemm = add_node(g, "Gemm", {"f", "fc.w"}, "y")->add_attribute();
    gemm->set_name("transB"), gemm->set_type(onnx::AttributeProto::INT), gemm->set_i(1);
    add_value(g->mutable_output(), "y", {-1, 5});
    corpus.push_back(p.SerializeAsString());
  }
  {  // opset 20: weights as external data, fp16 and bf16 initializers, ReduceMean with int64 axes, Reshape
    onnx::ModelProto p = base_model(20);
    auto* g = p.mutable_graph();
    add_init(g, "w", {2, 1, 3, 3}, 1, 4);
    auto* w = g->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<const char*, const char*>{"location", "w.bin"}, {"offset", "64"},
                        {"length", "72"}}) {
      auto* e = w->add_external_data();
      e->set_key(k), e->set_value(v);
    }
    add_init(g, "h", {2, 1, 1}, 10, 2);
    add_init(g, "bf", {2, 1, 1}, 16, 2);
    add_init(g, "axes", {2}, 7, 8);
    add_init(g, "shape", {2}, 7, 8);
    auto* c = add_node(g, "Conv", {"x", "w"}, "c");
    auto* grp = c->add_attribute();
    grp->set_name("group"), grp->set_type(onnx::AttributeProto::INT), grp->set_i(2);
    add_node(g, "Mul", {"c", "h"}, "m");
    add_node(g, "Add", {"m", "bf"}, "s");
    add_node(g, "ReduceMean", {"s", "axes"}, "rm");
    add_node(g, "Reshape", {"rm", "shape"}, "y");
    add_value(g->mutable_output(), "y", {-1, 2});
    corpus.push_back(p.SerializeAsString());
  }
  {  // opset 13, branches joined by Concat, typed int32/double data, an empty optional input
    onnx::ModelProto p = base_model(13);
    auto* g = p.mutable_graph();
    auto* d = g->add_initializer();
    d->set_name("k"), d->set_data_type(11), d->add_dims(1), d->add_double_data(0.5);
    add_node(g, "Sigmoid", {"x"}, "a");
    add_node(g, "HardSwish", {"x"}, "b");
    add_node(g, "Mul", {"a", "k"}, "am");
    auto* cat = add_node(g, "Concat", {"am", "b"}, "cat")->add_attribute();
    cat->set_name("axis"), cat->set_type(onnx::AttributeProto::INT), cat->set_i(1);
    add_node(g, "MaxPool", {"cat"}, "mp");
    add_node(g, "Dropout", {"mp", ""}, "y");
    add_value(g->mutable_output(), "y", {-1, 4, 4, 4});
    corpus.push_back(p.SerializeAsString());
  }
  return corpus;
}

// --- mutations -------------------------------------------------------------------------------------------

std::string mutate_bytes(std::string s, std::mt19937_64& rng) {
  auto below = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  for (int r = 1 + static_cast<int>(rng() % 4); r > 0; --r) {
    const size_t at = below(s.size());
    switch (rng() % 6) {
      case 0: if (!s.empty()) s[at] ^= static_cast<char>(1u << (rng() % 8)); break;
      case 1: if (!s.empty()) s[at] = "\x00\x01\x7f\x80\xff\x08\x0a\x12\x1a\x22\x3a"[rng() % 11]; break;
      case 2: s.insert(at, std::string(1 + below(8), static_cast<char>(rng()))); break;
      case 3: if (!s.empty()) s.erase(at, 1 + below(std::min<size_t>(16, s.size() - at))); break;
      case 4: s.resize(below(s.size() + 1)); break;
      default: s.insert(below(s.size() + 1), s.substr(at, 1 + below(64))); break;
    }
  }
  return s;
}

// Structure-aware: valid protobuf, wrong ONNX (the checks past parsing).
std::string mutate_model(const std::string& seed, std::mt19937_64& rng) {
  onnx::ModelProto p;
  p.ParseFromString(seed);
  auto* g = p.mutable_graph();
  auto pick = [&](int n) { return n ? static_cast<int>(rng() % n) : 0; };
  static const char* ops[] = {"Conv", "Resize", "Constant", "Add", "If", "Gemm", "Relu"};
  static const char* names[] = {"x", "w", "c", "y", "lo", "", "missing", "../w.bin", "/etc/passwd", "w.bin"};
  for (int r = 1 + pick(3); r > 0; --r) {
    switch (rng() % 9) {
      case 0: p.mutable_opset_import(0)->set_version(11 + pick(12)); break;
      case 1: if (g->node_size()) g->mutable_node(pick(g->node_size()))->set_op_type(ops[pick(7)]); break;
      case 2: {
        const int k = pick(g->node_size());
        if (g->node_size() && g->node(k).input_size()) g->mutable_node(k)->set_input(0, names[pick(10)]);
        break;
      }
      case 3:
        if (g->initializer_size()) g->mutable_initializer()->DeleteSubrange(pick(g->initializer_size()), 1);
        break;
      case 4:
        if (g->initializer_size()) {
          auto* t = g->mutable_initializer(pick(g->initializer_size()));
          if (rng() % 2 && t->dims_size()) t->set_dims(pick(t->dims_size()), static_cast<int64_t>(rng() % 9) - 1);
          else t->set_data_type(pick(20));
        }
        break;
      case 5:
        for (auto& t : *g->mutable_initializer())
          for (auto& e : *t.mutable_external_data())
            if (rng() % 2) e.set_value(e.key() == "location" ? names[pick(10)] : std::to_string(pick(5000) - 8));
        break;
      case 6:
        if (g->node_size() > 1) g->mutable_node()->SwapElements(0, g->node_size() - 1);
        break;
      case 7: if (g->node_size()) g->mutable_node(pick(g->node_size()))->add_input(g->node(pick(g->node_size())).output(0)); break;
      default:
        if (g->node_size() && g->node(0).attribute_size())
          g->mutable_node(0)->mutable_attribute(0)->set_type(static_cast<onnx::AttributeProto::AttributeType>(pick(11)));
    }
  }
  return p.SerializeAsString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  set_up_dir();  // the external data file the seeds name
  exercise(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}

#ifndef CNN_LIBFUZZER
int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "seeds") {  // the corpus libFuzzer starts from
    const auto corpus = seed_corpus();
    for (size_t i = 0; i < corpus.size(); ++i)
      std::ofstream(std::string(argv[2]) + "/seed" + std::to_string(i) + ".onnx", std::ios::binary) << corpus[i];
    return 0;
  }
  const size_t cases = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  set_up_dir();
  const auto corpus = seed_corpus();
  for (const auto& s : corpus)
    if (!exercise(s)) fail("a seed model is refused", "fix seed_corpus()");
  size_t accepted = 0;
  for (size_t i = 0; i < cases; ++i) {
    const std::string& seed = corpus[rng() % corpus.size()];
    std::string bytes = rng() % 2 ? mutate_model(seed, rng) : mutate_bytes(seed, rng);
    if (rng() % 4 == 0) bytes = mutate_bytes(bytes, rng);
    // CNN_FUZZ_LAST=FILE keeps each case in FILE before running it: a crash leaves its input there.
    if (const char* last = std::getenv("CNN_FUZZ_LAST")) std::ofstream(last, std::ios::binary) << bytes;
    accepted += exercise(bytes);
  }
  std::filesystem::remove_all(g_dir);
  std::printf("fuzz_onnx: %zu cases (%zu seeds), %zu accepted by read_onnx, the rest refused with exit 2\n", cases,
              corpus.size(), accepted);
  if (failures) {
    std::printf("fuzz_onnx: %d FAILED checks\n", failures);
    return 1;
  }
  std::printf("fuzz_onnx: OK\n");
  return 0;
}
#endif
