// The vendor-library search of kernels/cuda/vendor/vendor_loader.h: candidate places, dlopen, the version probe and the
// refusal of libraries built for another major version.
#include "kernels/cuda/vendor/vendor_loader.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

#include "src/base/error.h"

namespace cnn {
namespace gpu {

namespace {

// How to recognise and probe one library. The version functions' types are fixed by the vendor headers:
// kernels/cuda/vendor/vendor_runtime.cu static_asserts that they are these.
struct LibSpec {
  const char* name;
  const char* soname_stem;  // + the build's major version
  const char* wheel;        // site-packages/nvidia/<wheel>/lib
  const char* version_fn;   // size_t f(void), or int f(int*) when version_out
  bool version_out;
  const char* cudart_fn;    // size_t f(void): the CUDA runtime version it was built for; null: not reported
};
constexpr LibSpec kSpecs[kVendorLibCount] = {
    {"cuDNN", "libcudnn.so.", "cudnn", "cudnnGetVersion", false, "cudnnGetCudartVersion"},
    {"cuBLASLt", "libcublasLt.so.", "cublas", "cublasLtGetVersion", false, "cublasLtGetCudartVersion"},
    {"NCCL", "libnccl.so.", "nccl", "ncclGetVersion", true, nullptr},
};
const LibSpec& spec(VendorLib lib) { return kSpecs[static_cast<int>(lib)]; }

int build_major(VendorLib lib, const VendorBuild& b) {
  switch (lib) {
    case VendorLib::kCudnn: return b.cudnn_major;
    case VendorLib::kCublasLt: return b.cublas_major;
    case VendorLib::kNccl: return b.nccl_major;
  }
  return 0;
}

struct Version {
  int major, minor, patch;
};
// cuDNN 9, cuBLAS and NCCL >= 2.9 encode major*10000 + minor*100 + patch; cuDNN 8 and NCCL <= 2.8 major*1000.
Version decode(VendorLib lib, long v) {
  if (lib == VendorLib::kCublasLt || v >= 10000)
    return {static_cast<int>(v / 10000), static_cast<int>(v / 100 % 100), static_cast<int>(v % 100)};
  return {static_cast<int>(v / 1000), static_cast<int>(v / 100 % 10), static_cast<int>(v % 100)};
}

std::string cuda_version_text(long v) { return strprintf("%ld.%ld", v / 1000, v % 1000 / 10); }

// What fixes a missing or refused library, for the error message.
std::string install_hint(VendorLib lib, const VendorBuild& b) {
  const int cuda = b.cudart_version / 1000, cuda_minor = b.cudart_version % 1000 / 10;
  const std::string so = vendor_soname(lib, b);
  switch (lib) {
    case VendorLib::kCudnn:
      return strprintf("install cuDNN %d for CUDA %d: `pip install nvidia-cudnn-cu%d` (found in site-packages, "
                       "virtualenvs included), or the package libcudnn%d-cuda-%d from NVIDIA's CUDA repository for "
                       "Debian/Ubuntu, or set CNNTRAIN_CUDA_LIBS to the directory holding %s. --conv.impl custom "
                       "trains without cuDNN and cuBLASLt", b.cudnn_major, cuda, cuda, b.cudnn_major, cuda,
                       so.c_str());
    case VendorLib::kCublasLt:
      return strprintf("install cuBLAS %d: `pip install %s`, or the package libcublas-%d-%d from NVIDIA's CUDA "
                       "repository for Debian/Ubuntu (part of the CUDA toolkit), or set CNNTRAIN_CUDA_LIBS to the "
                       "directory holding %s. --conv.impl custom trains without cuDNN and cuBLASLt", b.cublas_major,
                       cuda >= 13 ? "nvidia-cublas" : strprintf("nvidia-cublas-cu%d", cuda).c_str(), cuda,
                       cuda_minor, so.c_str());
    case VendorLib::kNccl:
      return strprintf("install NCCL %d for CUDA %d: `pip install nvidia-nccl-cu%d`, or the package libnccl2 from "
                       "NVIDIA's CUDA repository for Debian/Ubuntu, or set CNNTRAIN_CUDA_LIBS to the directory "
                       "holding %s. NCCL is needed only by multi-GPU runs with --comm.backend nccl (the default "
                       "there); --comm.backend mpi averages gradients through host memory without it",
                       b.nccl_major, cuda, cuda, so.c_str());
  }
  return "";
}

// Why a loaded library is not the one this build needs; empty when it is.
std::string refusal(VendorLib lib, const VendorBuild& b, long version, long cudart) {
  const Version v = decode(lib, version);
  if (v.major != build_major(lib, b))
    return strprintf("it is %s %d.%d.%d; this build needs %s %d", spec(lib).name, v.major, v.minor, v.patch,
                     spec(lib).name, build_major(lib, b));
  if (cudart > 0 && cudart / 1000 != b.cudart_version / 1000)
    return strprintf("it is %s %d.%d.%d built for CUDA %s; this build's CUDA runtime is %s", spec(lib).name, v.major,
                     v.minor, v.patch, cuda_version_text(cudart).c_str(),
                     cuda_version_text(b.cudart_version).c_str());
  return "";
}

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) return map->l_name;
  return fallback;
}

std::vector<std::string> split_dirs(const char* list) {
  std::vector<std::string> dirs;
  std::string s = list ? list : "";
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(':', start), s.size());
    if (end > start) dirs.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

void glob_dirs(const std::string& pattern, std::vector<std::string>& out) {
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  ::globfree(&g);
}

}  // namespace

const char* vendor_lib_name(VendorLib lib) { return spec(lib).name; }

std::string vendor_soname(VendorLib lib, const VendorBuild& build) {
  return spec(lib).soname_stem + std::to_string(build_major(lib, build));
}

VendorSearchEnv VendorSearchEnv::from_process(const std::string& plugin_dir) {
  VendorSearchEnv env;
  env.user_dirs = split_dirs(std::getenv("CNNTRAIN_CUDA_LIBS"));
  env.plugin_dir = plugin_dir;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) env.cuda_home = home;
  std::vector<std::string> found;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* prefix = std::getenv(var); prefix && *prefix)
      glob_dirs(std::string(prefix) + "/lib/python3*/site-packages", found);
  if (const char* home = std::getenv("HOME"); home && *home)
    glob_dirs(std::string(home) + "/.local/lib/python3*/site-packages", found);
  for (const char* p : {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                        "/usr/lib/python3*/dist-packages", "/usr/lib/python3*/site-packages",
                        "/usr/lib64/python3*/site-packages"})
    glob_dirs(p, found);
  std::set<std::string> seen;
  for (const std::string& d : found)
    if (seen.insert(d).second) env.site_packages.push_back(d);
  return env;
}

std::vector<SearchPlace> vendor_search_places(VendorLib lib, const VendorBuild& build, const VendorSearchEnv& env) {
  std::vector<SearchPlace> places;
  for (const std::string& d : env.user_dirs) places.push_back({d, "$CNNTRAIN_CUDA_LIBS"});
  if (!env.plugin_dir.empty()) places.push_back({env.plugin_dir, "the plugin's directory"});
  for (const std::string& sp : env.site_packages) {
    places.push_back({sp + "/nvidia/" + spec(lib).wheel + "/lib", "pip wheel"});
    // CUDA 13's toolkit wheels (nvidia-cublas) share one directory per CUDA major version.
    if (lib == VendorLib::kCublasLt)
      places.push_back({sp + "/nvidia/cu" + std::to_string(build.cudart_version / 1000) + "/lib", "pip wheel"});
  }
  if (env.system_path) places.push_back({"", "the system loader's path"});
  if (!env.cuda_home.empty()) places.push_back({env.cuda_home + "/lib64", "the CUDA toolkit"});
  std::vector<SearchPlace> unique;
  std::set<std::string> seen;
  for (SearchPlace& p : places)
    if (seen.insert(p.dir).second) unique.push_back(std::move(p));
  return unique;
}

VendorLoader::Slot& VendorLoader::search(VendorLib lib) {
  Slot& slot = slots_[static_cast<int>(lib)];
  if (slot.searched) return slot;
  slot.searched = true;
  const LibSpec& s = spec(lib);
  const std::string so = vendor_soname(lib, build_);
  std::string tried;
  bool refused = false;
  for (const SearchPlace& place : vendor_search_places(lib, build_, env_)) {
    const std::string path = place.dir.empty() ? so : place.dir + "/" + so;
    const std::string where = place.dir.empty()
                                  ? "  " + place.origin + " (LD_LIBRARY_PATH, /etc/ld.so.cache, /lib, /usr/lib): "
                                  : "  " + place.dir + " (" + place.origin + "): ";
    if (!place.dir.empty() && ::access(path.c_str(), F_OK) != 0) {
      tried += "\n" + where + "no " + so;
      continue;
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      tried += "\n" + where + ::dlerror();
      continue;
    }
    const std::string file = loaded_path(h, path);
    void* vfn = ::dlsym(h, s.version_fn);
    void* cfn = s.cudart_fn ? ::dlsym(h, s.cudart_fn) : nullptr;
    std::string why;
    long version = 0, cudart = 0;
    if (!vfn || (s.cudart_fn && !cfn)) {
      why = strprintf("it has no %s (not %s?)", vfn ? s.cudart_fn : s.version_fn, s.name);
    } else {
      if (s.version_out) {
        int v = 0;
        reinterpret_cast<int (*)(int*)>(vfn)(&v);
        version = v;
      } else {
        version = static_cast<long>(reinterpret_cast<size_t (*)()>(vfn)());
      }
      if (cfn) cudart = static_cast<long>(reinterpret_cast<size_t (*)()>(cfn)());
      why = refusal(lib, build_, version, cudart);
    }
    if (!why.empty()) {
      ::dlclose(h);
      tried += "\n" + where + "refused " + file + ": " + why;
      refused = true;
      continue;
    }
    const Version v = decode(lib, version);
    slot.handle = h;
    slot.status.loaded = true;
    slot.status.path = file;
    slot.status.version = strprintf("%s %d.%d.%d", s.name, v.major, v.minor, v.patch) +
                          (cudart > 0 ? " for CUDA " + cuda_version_text(cudart) : std::string());
    return slot;
  }
  slot.status.error = strprintf("%s %d for CUDA %d (%s) %s. Tried:%s\nTo fix: %s.", s.name, build_major(lib, build_),
                                build_.cudart_version / 1000, so.c_str(),
                                refused ? "found, but none usable" : "not found", tried.c_str(),
                                install_hint(lib, build_).c_str());
  return slot;
}

void* VendorLoader::handle(VendorLib lib) {
  std::lock_guard<std::mutex> lock(mu_);
  const Slot& slot = search(lib);
  if (!slot.handle) raise(kExitFailure, "%s", slot.status.error.c_str());
  return slot.handle;
}

void* VendorLoader::symbol(VendorLib lib, const char* name) {
  void* h = handle(lib);
  void* fn = ::dlsym(h, name);
  if (!fn)
    raise(kExitFailure, "%s (%s) has no function %s, which this build calls: it is older than the %s this "
          "build was compiled against; %s", spec(lib).name, status(lib).path.c_str(), name, spec(lib).name,
          install_hint(lib, build_).c_str());
  return fn;
}

VendorLibStatus VendorLoader::status(VendorLib lib) {
  std::lock_guard<std::mutex> lock(mu_);
  return search(lib).status;
}

}  // namespace gpu
}  // namespace cnn
