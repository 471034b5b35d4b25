// cnntrain's way to the nvcc-built backend: dlopen of build/libcnntrain-cuda.so (kernels/cuda/cuda.mk), which
// carries the GPU code and the CUDA runtime (cuDNN, cuBLASLt and NCCL it loads itself when first needed:
// kernels/cuda/vendor/vendor_loader.h). Loading it only for --device cuda and --gpu-info keeps CUDA out of the trainer's
// own dependencies.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/collectives.h"
#include "src/base/error.h"

namespace cnn {

namespace {

constexpr const char* kPluginName = "libcnntrain-cuda.so";

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The plugin, loaded once; it stays loaded for the process's lifetime (the backend's code lives in it).
void* plugin() {
  static void* lib = nullptr;
  if (lib) return lib;
  std::vector<std::string> paths;
  if (const char* env = std::getenv("CNNTRAIN_CUDA_PLUGIN")) paths.push_back(env);
  const std::string dir = exe_dir();
  paths.push_back(dir + "/" + kPluginName);
  paths.push_back(dir + "/../lib/" + kPluginName);
  std::string tried;
  for (const std::string& p : paths) {
    if (::access(p.c_str(), R_OK) != 0) {
      tried += "\n  " + p + ": not found";
      continue;
    }
    // RTLD_NOW: a missing symbol (a plugin of another build) fails here, with its name, not in a step.
    lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += "\n  " + p + ": " + ::dlerror();
  }
  if (!lib)
    raise(kExitFailure, "--device cuda: cannot load the CUDA backend (%s):%s\nBuild it with `make USE_CUDA=1` "
          "(needs nvcc), or point CNNTRAIN_CUDA_PLUGIN at it; or use --device cpu", kPluginName, tried.c_str());
  return lib;
}

template <class Fn>
Fn entry(const char* name) {
  auto fn = reinterpret_cast<Fn>(::dlsym(plugin(), name));
  if (!fn) raise(kExitFailure, "--device cuda: %s has no entry point %s (a plugin of another cnntrain version?)",
                 kPluginName, name);
  return fn;
}

}  // namespace

std::unique_ptr<Backend> load_cuda_backend(int device, const GpuOptions& opts) {
  auto make = entry<Backend* (*)(int, const GpuOptions*, std::string*, int*)>("cnntrain_cuda_make_backend");
  std::string error;
  int code = kExitFailure;
  Backend* be = make(device, &opts, &error, &code);
  if (!be) raise(code, "%s", error.c_str());
  return std::unique_ptr<Backend>(be);
}

int load_cuda_device_count() {
  auto count = entry<int (*)(std::string*, int*)>("cnntrain_cuda_device_count");
  std::string error;
  int code = kExitFailure;
  const int n = count(&error, &code);
  if (n < 0) raise(code, "%s", error.c_str());
  return n;
}

int load_cuda_gpu_info(const std::string& nvidia_smi_release, std::string* report) {
  return entry<int (*)(const std::string*, std::string*)>("cnntrain_cuda_gpu_info")(&nvidia_smi_release, report);
}

DeviceInfo load_cuda_device_info(int device) {
  DeviceInfo info;
  entry<void (*)(int, DeviceInfo*)>("cnntrain_cuda_device_info")(device, &info);
  return info;
}

std::unique_ptr<Collectives> load_cuda_collectives(Backend& be) {
  auto make = entry<Collectives* (*)(Backend*, std::string*, int*)>("cnntrain_cuda_make_collectives");
  std::string error;
  int code = kExitFailure;
  Collectives* c = make(&be, &error, &code);
  if (!c) raise(code, "%s", error.c_str());
  return std::unique_ptr<Collectives>(c);
}

}  // namespace cnn
