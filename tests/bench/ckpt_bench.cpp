// Checkpoint write/read throughput for a ResNet-50-sized model (25,557,032 parameters with ResNet-50's
// tensor shapes, plus SGD momentum: 204 MB), run under mpirun with any rank count.
// Usage: mpirun -np N build/bench/ckpt_bench DIR [repeats]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"
#include "src/base/error.h"

using namespace cnn;

namespace {

// ResNet-50 (torchvision layout: conv without bias, BN weight+bias, bottleneck [3,4,6,3], fc 2048->1000).
std::vector<std::pair<std::string, std::vector<int>>> resnet50_shapes() {
  std::vector<std::pair<std::string, std::vector<int>>> v;
  auto conv = [&](const std::string& n, int k, int r, int c) { v.push_back({n + ".weight", {k, r, r, c}}); };
  auto bn = [&](const std::string& n, int c) {
    v.push_back({n + ".weight", {c}});
    v.push_back({n + ".bias", {c}});
  };
  conv("conv1", 64, 7, 3);
  bn("bn1", 64);
  int in = 64;
  const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < blocks[s]; ++b) {
      std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      int w = width[s], out = 4 * w;
      conv(p + ".conv1", w, 1, in);
      bn(p + ".bn1", w);
      conv(p + ".conv2", w, 3, w);
      bn(p + ".bn2", w);
      conv(p + ".conv3", out, 1, w);
      bn(p + ".bn3", out);
      if (b == 0) {
        conv(p + ".downsample", out, 1, in);
        bn(p + ".downsample_bn", out);
      }
      in = out;
    }
  v.push_back({"fc.weight", {1000, 2048}});
  v.push_back({"fc.bias", {1000}});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  comm_init(&argc, &argv);
  if (argc < 2) {
    if (world_rank() == 0) std::fprintf(stderr, "usage: ckpt_bench DIR [repeats]\n");
    comm_finalize();
    return 2;
  }
  const std::string dir = argv[1];
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  auto shapes = resnet50_shapes();
  size_t total = 0;
  for (auto& s : shapes) {
    size_t n = 1;
    for (int d : s.second) n *= d;
    total += n;
  }
  std::vector<float> params(total), mom(total);
  for (size_t i = 0; i < total; ++i) {
    params[i] = static_cast<float>(i % 1000) * 1e-3f;
    mom[i] = -params[i];
  }
  std::vector<CheckpointArray> arrays;
  size_t off = 0;
  for (auto& s : shapes) {
    arrays.push_back({"params/" + s.first, s.second, params.data() + off});
    arrays.push_back({"optimizer/momentum/" + s.first, s.second, mom.data() + off});
    off += arrays.back().size();
  }
  CheckpointMeta meta;
  meta.model = "resnet50-shaped";
  meta.world_size = world_size();
  meta.global_batch = 256;
  std::vector<double> wr, rd;
  for (int r = 0; r < reps; ++r) {
    const std::string path = dir + "/" + checkpoint_name(r);
    barrier();
    CheckpointWriteStats st = write_checkpoint(path, arrays, meta);
    wr.push_back(st.bytes / 1e6 / st.seconds);
    std::vector<float> p2(total), m2(total);
    std::vector<CheckpointArray> in = arrays;
    size_t o = 0;
    for (size_t i = 0; i < in.size(); i += 2) {
      in[i].data = p2.data() + o;
      in[i + 1].data = m2.data() + o;
      o += in[i].size();
    }
    barrier();
    auto t0 = std::chrono::steady_clock::now();
    CheckpointMeta m;
    std::string err;
    if (!read_checkpoint(path, in, m, err)) fatal(kExitCheckpoint, err);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rd.push_back(st.bytes / 1e6 / s);
    if (p2 != params || m2 != mom) fatal(kExitFailure, "read back differs from what was written");
  }
  if (world_rank() == 0) {
    std::sort(wr.begin(), wr.end());
    std::sort(rd.begin(), rd.end());
    std::printf("checkpoint %zu params (+momentum) = %.1f MB, %d rank(s): write %.0f MB/s, read %.0f MB/s "
                "(median of %d)\n", total, 2.0 * total * 4 / 1e6, world_size(), wr[wr.size() / 2], rd[rd.size() / 2],
                reps);
  }
  comm_finalize();
  return 0;
}
