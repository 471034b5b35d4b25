// Evaluation logits of a zoo model initialised by --init.from's loader, for the PyTorch parity test
// (tests/finetune/torchvision_parity.py):
//   init_from_run MODEL WEIGHTS IN.bin N C H W CLASSES OUT.bin
// WEIGHTS: any file --init.from reads (here torchvision's state dict as safetensors), loaded strictly: every
// parameter and statistic must come from the file. IN.bin: float32 NCHW images; OUT.bin: float32 [N, CLASSES].
// The fast CPU backend (oneDNN).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "src/model/zoo.h"
#include "src/train/init_from.h"

namespace {

int run(int argc, char** argv) {
  using namespace cnn;
  if (argc != 10) {
    std::fprintf(stderr, "usage: init_from_run MODEL WEIGHTS IN.bin N C H W CLASSES OUT.bin\n");
    return kExitUsage;
  }
  const int n = std::atoi(argv[4]), c = std::atoi(argv[5]), h = std::atoi(argv[6]), w = std::atoi(argv[7]);
  auto be = make_cpu_backend(1, CpuKernels::kFast);
  Net net(*be, Dims{h, w, c}, std::atoi(argv[8]));
  build_model(argv[1], net, ModelOptions{});
  net.build(n, 1);
  const InitFromReport r = init_from_file(net, {argv[2], "", true});
  std::printf("%s: %zu tensors from %s (%s), %zu unused\n", argv[1], r.loaded, argv[2], r.format.c_str(),
              r.unused.size());
  std::vector<float> nchw(static_cast<size_t>(n) * c * h * w), nhwc(nchw.size());
  std::ifstream in(argv[3], std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(nchw.data()), static_cast<std::streamsize>(nchw.size() * sizeof(float))))
    raise(kExitUsage, "cannot read %zu floats from %s", nchw.size(), argv[3]);
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          nhwc[((static_cast<size_t>(i) * h + y) * w + x) * c + ch] =
              nchw[((static_cast<size_t>(i) * c + ch) * h + y) * w + x];
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * nhwc.size()));
  be->upload(d_x, nhwc.data(), sizeof(float) * nhwc.size());
  const void* logits = net.forward(d_x, n, false);
  std::vector<float> out(static_cast<size_t>(n) * net.num_classes());
  be->download(out.data(), logits, sizeof(float) * out.size());
  std::ofstream o(argv[9], std::ios::binary);
  if (!o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(sizeof(float) * out.size())))
    raise(kExitUsage, "cannot write %s", argv[9]);
  be->release(d_x);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cnn::Error& e) {
    std::fprintf(stderr, "init_from_run: %s\n", e.what());
    return e.code();
  }
}
