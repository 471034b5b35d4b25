// One training batch of a zoo model through cnntrain, written to HDF5 for tests/parity/torch_parity.py: the
// initial parameters, the input and labels, the logits, the mean cross-entropy, every parameter gradient and
// the batch-norm running statistics after the step's forward pass. Layouts are cnntrain's (NHWC input, KRSC
// convolution weights, [out, in] linear weights); the script converts them.
// Usage: parity_dump MODEL H W C CLASSES BATCH SEED BACKEND OUT.h5   (BACKEND: cpu, reference or emu)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/h5_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/model/zoo.h"

namespace cnn {
namespace {

void write(hid_t file, const std::string& path, const std::vector<hsize_t>& dims, const float* data) {
  H5Handle lcpl = h5_plist(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Handle sp = h5_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle d = h5_dataset(H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, sp.get(), lcpl.get(), H5P_DEFAULT,
                                     H5P_DEFAULT));
  if (!d.valid() || H5Dwrite(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    raise(kExitFailure, "cannot write '%s': %s", path.c_str(), h5_last_error().c_str());
}

std::vector<hsize_t> dims_of(const std::vector<int>& shape) { return {shape.begin(), shape.end()}; }

std::vector<float> download(Backend& be, const float* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

// Each residual block's last batch-norm scale drawn from [lo, hi] (as zero-init-residual training starts them
// small): ResNet-50 at plain initialisation is so ill-conditioned in float32 that PyTorch's own float32 gradients
// differ from its float64 ones by 20-30%, which leaves nothing to compare at 1e-4.
void scale_residual_branches(Backend& be, Net& net, float lo, float hi) {
  std::vector<float> p = download(be, net.params(), net.num_params());
  const auto& table = net.param_table();
  CounterRng rng(99, 1);
  for (size_t t = 0; t < table.size(); ++t) {
    const std::string& name = table[t].name;
    // layerS.B.bnK.weight where the block has no bn(K+1): its last batch norm.
    const size_t bn = name.rfind(".bn");
    if (name.rfind("layer", 0) != 0 || bn == std::string::npos || name.compare(name.size() - 7, 7, ".weight") != 0)
      continue;
    const std::string next = name.substr(0, bn) + ".bn" + std::to_string(std::atoi(name.c_str() + bn + 3) + 1) + ".";
    bool last = true;
    for (const ParamInfo& q : table) last = last && q.name.rfind(next, 0) != 0;
    if (!last) continue;
    for (size_t j = 0; j < table[t].size; ++j) p[table[t].offset + j] = lo + (hi - lo) * rng.uniform();
  }
  be.upload(net.params(), p.data(), sizeof(float) * p.size());
}

int run(int argc, char** argv) {
  float residual_lo = 0, residual_hi = 0;
  if (argc > 2 && std::string(argv[1]) == "--residual-gamma") {
    if (std::sscanf(argv[2], "%f:%f", &residual_lo, &residual_hi) != 2) raise(kExitUsage, "--residual-gamma LO:HI");
    argc -= 2;
    argv += 2;
  }
  if (argc != 10) {
    std::fprintf(stderr, "usage: %s [--residual-gamma LO:HI] MODEL H W C CLASSES BATCH SEED cpu|reference|emu OUT.h5\n",
                 argv[0]);
    return kExitUsage;
  }
  const std::string model = argv[1], backend = argv[8], out = argv[9];
  const Dims in{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])};
  const int classes = std::atoi(argv[5]), n = std::atoi(argv[6]);
  const uint64_t seed = std::strtoull(argv[7], nullptr, 10);
  std::unique_ptr<Backend> be = backend == "cpu"         ? make_cpu_backend(1, CpuKernels::kFast)
                                : backend == "reference" ? make_cpu_backend(1, CpuKernels::kReference)
                                : backend == "emu"       ? make_emu_backend()
                                                         : nullptr;
  if (!be) raise(kExitUsage, "unknown backend '%s' (cpu, reference or emu)", backend.c_str());
  Net net(*be, in, classes);
  build_model(model, net);
  net.build(n, seed);
  std::vector<float> x(in.size() * n);
  CounterRng rng(seed, 5);
  for (float& v : x) v = 2 * rng.uniform() - 1;
  std::vector<int32_t> labels(n);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
  if (residual_hi > 0) scale_residual_branches(*be, net, residual_lo, residual_hi);
  const std::vector<float> params = download(*be, net.params(), net.num_params());
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  int32_t* d_labels = static_cast<int32_t*>(be->alloc(sizeof(int32_t) * n));
  float* d_dl = static_cast<float*>(be->alloc(sizeof(float) * n * classes));
  be->upload(d_x, x.data(), sizeof(float) * x.size());
  be->upload(d_labels, labels.data(), sizeof(int32_t) * n);
  // The mean cross-entropy over the batch, as a training step computes it.
  net.zero_grads();
  const float* d_logits = static_cast<const float*>(net.forward(d_x, n, true));  // an fp32 net
  const std::vector<float> logits = download(*be, d_logits, static_cast<size_t>(n) * classes);
  double loss_sum = 0;
  int64_t correct = 0;
  be->softmax_xent(DType::kF32, n, classes, d_logits, d_labels, 0.f, 1.f / n, d_dl, &loss_sum, &correct);
  net.backward(d_dl, n);
  const std::vector<float> grads = download(*be, net.grads(), net.num_params());
  const std::vector<float> buffers = download(*be, net.buffers(), net.num_buffers());
  be->release(d_x);
  be->release(d_labels);
  be->release(d_dl);

  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle file = h5_file(H5Fcreate(out.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) raise(kExitFailure, "cannot create '%s': %s", out.c_str(), h5_last_error().c_str());
  write(file.get(), "input", {static_cast<hsize_t>(n), static_cast<hsize_t>(in.h), static_cast<hsize_t>(in.w),
                              static_cast<hsize_t>(in.c)}, x.data());
  std::vector<float> lf(labels.begin(), labels.end());
  write(file.get(), "labels", {static_cast<hsize_t>(n)}, lf.data());
  write(file.get(), "logits", {static_cast<hsize_t>(n), static_cast<hsize_t>(classes)}, logits.data());
  for (const ParamInfo& p : net.param_table()) {
    write(file.get(), "params/" + p.name, dims_of(p.shape), params.data() + p.offset);
    write(file.get(), "grads/" + p.name, dims_of(p.shape), grads.data() + p.offset);
  }
  for (const ParamInfo& b : net.buffer_table())
    write(file.get(), "buffers/" + b.name, dims_of(b.shape), buffers.data() + b.offset);
  h5_write_attr_floats(file.get(), "loss", {loss_sum / n});
  h5_write_attr_strings(file.get(), "model", {model});
  h5_write_attr_strings(file.get(), "backend", {be->name()});
  std::printf("%s (%s): %zu parameters, loss %.6f, wrote %s\n", model.c_str(), backend.c_str(), net.num_params(),
              loss_sum / n, out.c_str());
  return 0;
}

}  // namespace
}  // namespace cnn

int main(int argc, char** argv) {
  try {
    return cnn::run(argc, argv);
  } catch (const cnn::Error& e) {
    std::fprintf(stderr, "parity_dump: %s\n", e.what());
    return e.code();
  }
}
