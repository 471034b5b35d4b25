// Runs an imported ONNX model the way training does, for the PyTorch parity test (tests/onnx/import_parity.py):
//   onnx_run MODEL.onnx IN.bin N C H W CLASSES OUT_DIR [LR LABELS.bin]
// IN.bin: float32 NCHW images. Writes OUT_DIR/logits.bin (float32 [N, CLASSES], evaluation mode). With LR:
// one SGD step (plain, no momentum or decay) on the mean cross-entropy of LABELS.bin (int32 [N]) in training
// mode, then OUT_DIR/params.bin (every parameter after the step, cnntrain layout, in table order) and
// OUT_DIR/params.txt (one "NAME SIZE DIM..." line per parameter). The graph is fused as training fuses it. CPU reference kernels unless
// CNNTRAIN_ONNX_RUN_BACKEND=cpu (the fast backend). Exit 2 with the importer's message on a bad model.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "src/model/graph_rewrite.h"
#include "src/model/net.h"
#include "src/model/onnx/onnx_import.h"

namespace {

template <class T>
std::vector<T> read_file(const std::string& path, size_t n) {
  std::vector<T> v(n);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T))))
    cnn::raise(cnn::kExitUsage, "cannot read %zu values from %s", n, path.c_str());
  return v;
}

void write_file(const std::string& path, const void* p, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  if (!f.write(static_cast<const char*>(p), static_cast<std::streamsize>(bytes)))
    cnn::raise(cnn::kExitUsage, "cannot write %s", path.c_str());
}

int run(int argc, char** argv) {
  using namespace cnn;
  if (argc != 9 && argc != 11) {
    std::fprintf(stderr, "usage: onnx_run MODEL.onnx IN.bin N C H W CLASSES OUT_DIR [LR LABELS.bin]\n");
    return kExitUsage;
  }
  const int n = std::atoi(argv[3]), c = std::atoi(argv[4]), h = std::atoi(argv[5]), w = std::atoi(argv[6]);
  const int classes = std::atoi(argv[7]);
  const std::string out = argv[8];
  const char* kind = std::getenv("CNNTRAIN_ONNX_RUN_BACKEND");
  auto be = make_cpu_backend(1, kind && std::string(kind) == "cpu" ? CpuKernels::kFast : CpuKernels::kReference);
  Net net(*be, Dims{h, w, c}, classes);
  const OnnxModel model = read_onnx(argv[1]);
  const OnnxImport imp = import_onnx(model, net, BnOptions{});
  fuse_graph(net);  // as training does (src/train/setup.cpp): batch norm + ReLU or ReLU6, residual joins
  net.build(n, 1);
  load_onnx_values(imp, net);
  // NCHW -> NHWC
  const std::vector<float> nchw = read_file<float>(argv[2], static_cast<size_t>(n) * c * h * w);
  std::vector<float> nhwc(nchw.size());
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          nhwc[((static_cast<size_t>(i) * h + y) * w + x) * c + ch] =
              nchw[((static_cast<size_t>(i) * c + ch) * h + y) * w + x];
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * nhwc.size()));
  be->upload(d_x, nhwc.data(), sizeof(float) * nhwc.size());
  std::vector<float> logits(static_cast<size_t>(n) * classes);
  be->download(logits.data(), net.forward(d_x, n, false), sizeof(float) * logits.size());
  write_file(out + "/logits.bin", logits.data(), sizeof(float) * logits.size());
  if (argc == 11) {
    const float lr = static_cast<float>(std::atof(argv[9]));
    const std::vector<int32_t> labels = read_file<int32_t>(argv[10], static_cast<size_t>(n));
    int32_t* d_y = static_cast<int32_t*>(be->alloc(sizeof(int32_t) * n));
    be->upload(d_y, labels.data(), sizeof(int32_t) * n);
    void* d_dl = be->alloc(sizeof(float) * logits.size());
    double loss = 0;
    int64_t correct = 0;
    const void* y = net.forward(d_x, n, true);
    be->softmax_xent(DType::kF32, n, classes, y, d_y, 0.f, 1.f / static_cast<float>(n), d_dl, &loss, &correct);
    net.zero_grads();
    net.backward(d_dl, n);
    float* d_v = static_cast<float*>(be->alloc(sizeof(float) * net.num_params()));
    be->fill(d_v, net.num_params(), 0.f);
    be->sgd_update(net.num_params(), net.params(), net.grads(), d_v, lr, 0.f, 0.f, false);
    std::vector<float> p(net.num_params());
    be->download(p.data(), static_cast<const Net&>(net).params(), sizeof(float) * p.size());
    write_file(out + "/params.bin", p.data(), sizeof(float) * p.size());
    std::ofstream t(out + "/params.txt");
    for (const ParamInfo& pi : net.param_table()) {
      t << pi.name << " " << pi.size;
      for (int d : pi.shape) t << " " << d;
      t << "\n";
    }
    std::printf("loss %.6f\n", loss / n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cnn::Error& e) {
    std::fprintf(stderr, "onnx_run: %s\n", e.what());
    return e.code();
  }
}
