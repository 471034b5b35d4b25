// cnntrain's way to the nvcc-built backend: dlopen of build/libcnntrain-cuda.so (kernels/cuda.mk), which
// carries the GPU code and links the CUDA runtime, cuDNN and cuBLASLt. Loading it only for --device cuda
// keeps those libraries out of the trainer's own dependencies.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda_backend.h"
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

}  // namespace

std::unique_ptr<Backend> load_cuda_backend(int local_rank, const GpuOptions& opts) {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("CNNTRAIN_CUDA_PLUGIN")) paths.push_back(env);
  const std::string dir = exe_dir();
  paths.push_back(dir + "/" + kPluginName);
  paths.push_back(dir + "/../lib/" + kPluginName);
  std::string tried;
  void* lib = nullptr;
  for (const std::string& p : paths) {
    if (::access(p.c_str(), R_OK) != 0) {
      tried += "\n  " + p + ": not found";
      continue;
    }
    // RTLD_NOW: a missing cuDNN/cuBLASLt symbol fails here, with its name, not in the middle of a step.
    lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += "\n  " + p + ": " + ::dlerror();
  }
  if (!lib)
    raise(kExitFailure, "--device cuda: cannot load the CUDA backend (%s):%s\nIt needs the CUDA 13 runtime's "
          "driver, cuDNN 9 and cuBLASLt 13 on the library path (LD_LIBRARY_PATH; pip's nvidia-cudnn-cu13 and "
          "nvidia-cublas wheels work too); or use --device cpu", kPluginName, tried.c_str());
  using MakeFn = Backend* (*)(int, const GpuOptions*, std::string*, int*);
  auto make = reinterpret_cast<MakeFn>(::dlsym(lib, "cnntrain_cuda_make_backend"));
  if (!make) raise(kExitFailure, "--device cuda: %s has no entry point cnntrain_cuda_make_backend (a plugin of "
                   "another cnntrain version?)", kPluginName);
  std::string error;
  int code = kExitFailure;
  Backend* be = make(local_rank, &opts, &error, &code);
  if (!be) raise(code, "%s", error.c_str());
  // The library stays loaded for the process's lifetime: the backend's code lives in it.
  return std::unique_ptr<Backend>(be);
}

}  // namespace cnn
