// cnntrain's own logits of a checkpoint's model, for the ONNX export tests (tests/onnx/export_parity.py):
//   ckpt_logits CKPT raw|ema|swa IN.f32 N OUT.f32
// IN.f32: N images as float32 [N, C, H, W] (NCHW, as ONNX Runtime takes them); OUT.f32: the evaluation-mode
// logits, float32 [N, classes]. The model is rebuilt from the checkpoint alone (src/train/checkpoint_model.h),
// as `cnntrain-data export --format onnx` rebuilds it.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/train/checkpoint_model.h"

using namespace cnn;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: ckpt_logits CKPT raw|ema|swa IN.f32 N OUT.f32\n");
    return kExitUsage;
  }
  try {
    CheckpointLoad how;
    how.which = parse_export_weights(argv[2], "ckpt_logits");
    const int n = how.max_batch = std::atoi(argv[4]);
    CheckpointModel m = load_checkpoint_model(argv[1], how);
    const Dims d = m.net->input_dims();
    std::vector<float> nchw(static_cast<size_t>(n) * d.size()), nhwc(nchw.size());
    std::ifstream in(argv[3], std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(nchw.data()), static_cast<std::streamsize>(nchw.size() * sizeof(float))))
      raise(kExitUsage, "%s: cannot read %zu floats", argv[3], nchw.size());
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < d.c; ++c)
        for (int y = 0; y < d.h; ++y)
          for (int x = 0; x < d.w; ++x)
            nhwc[((static_cast<size_t>(i) * d.h + y) * d.w + x) * d.c + c] =
                nchw[((static_cast<size_t>(i) * d.c + c) * d.h + y) * d.w + x];
    float* dx = static_cast<float*>(m.be->alloc(sizeof(float) * nhwc.size()));
    m.be->upload(dx, nhwc.data(), sizeof(float) * nhwc.size());
    const void* logits = m.net->forward(dx, n, false);
    std::vector<float> out(static_cast<size_t>(n) * m.net->num_classes());
    m.be->download(out.data(), logits, sizeof(float) * out.size());
    m.be->release(dx);
    std::ofstream o(argv[5], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
    return o ? 0 : kExitFailure;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckpt_logits: error: %s\n", e.what());
    return e.code();
  }
}
