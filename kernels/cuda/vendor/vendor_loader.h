// Finds, loads and version-checks the NVIDIA libraries of the CUDA plugin (cuDNN, cuBLASLt, NCCL) when one is
// first needed, so that the plugin has no load-time dependency on them: a machine with only the driver trains
// with --conv.impl custom on one GPU, and a missing or mismatched library is named when it is needed.
// kernels/cuda/vendor/vendor_lazy.h routes every call of the nvcc code through here. Plain C++ without CUDA headers, so
// the search order and the refusals are unit-tested against fake libraries (tests/unit/test_vendor_loader.cpp).
//
// Search order per library (docs/gpu.md): each directory of $CNNTRAIN_CUDA_LIBS (colon-separated), the
// plugin's own directory (the bundle's lib/), pip wheels in Python's site-packages (nvidia/<name>/lib and
// CUDA 13's nvidia/cu13/lib), the system loader's path (LD_LIBRARY_PATH, ld.so.cache), then
// $CUDA_HOME/lib64 (/usr/local/cuda). A library whose major version, or the CUDA major version it was built
// for, differs from the build's is refused and the search goes on; nothing usable ends in an error listing
// every place tried and what to install.
#pragma once
#include <mutex>
#include <string>
#include <vector>

namespace cnn {
namespace gpu {

enum class VendorLib { kCudnn = 0, kCublasLt = 1, kNccl = 2 };
constexpr int kVendorLibCount = 3;
const char* vendor_lib_name(VendorLib lib);  // "cuDNN", "cuBLASLt", "NCCL"

// The NCCL major version the collectives are written for; src/comm/nccl_lazy.h asserts that <nccl.h> is of
// it (NCCL's headers stay in src/comm).
constexpr int kNcclMajor = 2;

// What the plugin was compiled against (the headers' version macros).
struct VendorBuild {
  int cudart_version = 0;  // CUDART_VERSION, e.g. 13000
  int cudnn_major = 0;     // CUDNN_MAJOR
  int cublas_major = 0;    // CUBLAS_VER_MAJOR
  int nccl_major = 0;      // kNcclMajor (= NCCL_MAJOR)
};

// Where the search looks. from_process() reads the environment; tests fill it themselves.
struct VendorSearchEnv {
  std::vector<std::string> user_dirs;      // $CNNTRAIN_CUDA_LIBS
  std::string plugin_dir;                  // the directory of the plugin (or of the executable linking it)
  std::vector<std::string> site_packages;  // Python site-packages directories that exist
  bool system_path = true;                 // also dlopen the bare soname (the system loader's path)
  std::string cuda_home = "/usr/local/cuda";
  // site_packages: $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local/lib/python3*, /usr/lib/python3*
  // ({site,dist}-packages), in that order; cuda_home: $CUDA_HOME if set.
  static VendorSearchEnv from_process(const std::string& plugin_dir);
};

// One place the search looks: a directory, or (dir empty) the system loader's path; `origin` says why it is
// on the list ("$CNNTRAIN_CUDA_LIBS", "pip wheel", ...).
struct SearchPlace {
  std::string dir, origin;
};
std::vector<SearchPlace> vendor_search_places(VendorLib lib, const VendorBuild& build, const VendorSearchEnv& env);
std::string vendor_soname(VendorLib lib, const VendorBuild& build);  // "libcudnn.so.9"

struct VendorLibStatus {
  bool loaded = false;
  std::string path;     // the file loaded
  std::string version;  // "cuDNN 9.13.0 for CUDA 13.0"
  std::string error;    // why not: each place tried, refusals, and what to install
};

class VendorLoader {
 public:
  VendorLoader(const VendorBuild& build, VendorSearchEnv env) : build_(build), env_(std::move(env)) {}
  VendorLoader(const VendorLoader&) = delete;
  VendorLoader& operator=(const VendorLoader&) = delete;

  // The loaded, accepted library; searched on the first call. Throws Error(kExitFailure) with status().error
  // when there is none. Loaded libraries stay for the process's lifetime.
  void* handle(VendorLib lib);
  // dlsym in the library; throws Error(kExitFailure) naming the file and the symbol when it lacks it.
  void* symbol(VendorLib lib, const char* name);
  // The outcome of the search (running it if needed); never throws. For --gpu-info.
  VendorLibStatus status(VendorLib lib);

 private:
  struct Slot {
    bool searched = false;
    void* handle = nullptr;
    VendorLibStatus status;
  };
  Slot& search(VendorLib lib);  // with mu_ held

  const VendorBuild build_;
  const VendorSearchEnv env_;
  std::mutex mu_;
  Slot slots_[kVendorLibCount];
};

// The plugin's loader (kernels/cuda/vendor/vendor_runtime.cu: the build's versions, the plugin's directory, the process's
// environment); kernels/cuda/vendor/vendor_lazy.h resolves through it.
VendorLoader& vendor_loader();

}  // namespace gpu
}  // namespace cnn
