// The nvcc side of the run-time loading of cuDNN, cuBLASLt and NCCL (kernels/cuda/vendor/vendor_loader.h) and of the
// driver check (kernels/cuda/driver_check.h): the versions this build was compiled against, the plugin's own
// directory, and the --gpu-info report. nvcc builds only.
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/driver_check.h"
#include "kernels/cuda/vendor/vendor_lazy.h"
#include "src/base/error.h"

// The loader calls the version functions through these types (it is compiled without the vendor headers).
static_assert(std::is_same<decltype(&::cudnnGetVersion), size_t (*)()>::value, "cudnnGetVersion's type changed");
static_assert(std::is_same<decltype(&::cudnnGetCudartVersion), size_t (*)()>::value, "cudnnGetCudartVersion");
static_assert(std::is_same<decltype(&::cublasLtGetVersion), size_t (*)()>::value, "cublasLtGetVersion");
static_assert(std::is_same<decltype(&::cublasLtGetCudartVersion), size_t (*)()>::value, "cublasLtGetCudartVersion");

namespace cnn {

namespace {

// The file holding this code: the plugin, or the test binary that links the GPU library.
std::string own_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cuda_driver_verdict), &info) && info.dli_fname) return info.dli_fname;
  return "";
}

std::string cuda_text(int v) { return strprintf("%d.%d", v / 1000, v % 1000 / 10); }

// "  GPU 0: NVIDIA H100 80GB HBM3, compute capability 9.0, 79.1 GiB, PCI 0000:19:00.0" per device; false when
// the runtime cannot list them (the reason is in the report).
bool list_gpus(std::string& r) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r += strprintf("GPUs: none usable (cudaGetDeviceCount: %s: %s)\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return false;
  }
  if (count == 0) r += "GPUs: none visible (check CUDA_VISIBLE_DEVICES and the job's GPU allocation)\n";
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    char bus[32] = "";
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    r += strprintf("GPU %d: %s, compute capability %d.%d, %.1f GiB, PCI %s\n", d, p.name, p.major, p.minor,
                   p.totalGlobalMem / 1073741824.0, bus);
  }
  return count > 0;
}

}  // namespace

namespace gpu {

VendorLoader& vendor_loader() {
  static VendorLoader loader(VendorBuild{CUDART_VERSION, CUDNN_MAJOR, CUBLAS_VER_MAJOR, kNcclMajor}, [] {
    const std::string self = own_path();
    const size_t slash = self.find_last_of('/');
    return VendorSearchEnv::from_process(slash == std::string::npos ? "." : self.substr(0, slash));
  }());
  return loader;
}

}  // namespace gpu

DriverVerdict cuda_driver_verdict(const std::string& release_hint) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  const std::string release = read_driver_release();
  return judge_driver(driver, release.empty() ? release_hint : release, CUDART_VERSION);
}

}  // namespace cnn

extern "C" int cnntrain_cuda_gpu_info(const std::string* nvidia_smi_release, std::string* report) {
  using namespace cnn;
  std::string& r = *report;
  r += "CUDA plugin: " + own_path() + "\n";
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  r += "CUDA runtime: " + cuda_text(runtime) + " (linked into the plugin; needs driver >= " +
       std::to_string(min_driver_branch(runtime / 1000)) + ")\n";
  const std::string release = read_driver_release();
  r += "driver: " + (driver > 0 ? "supports CUDA " + cuda_text(driver) : std::string("none found by the CUDA runtime"));
  r += (release.empty() ? "" : ", release " + release + " (/proc/driver/nvidia/version)") + std::string("\n");
  bool vendor_ok = true;
  for (int i = 0; i < gpu::kVendorLibCount; ++i) {
    const auto lib = static_cast<gpu::VendorLib>(i);
    const gpu::VendorLibStatus s = gpu::vendor_loader().status(lib);
    r += std::string(gpu::vendor_lib_name(lib)) + ": " + (s.loaded ? s.version + " at " + s.path : s.error) + "\n";
    if (lib != gpu::VendorLib::kNccl) vendor_ok = vendor_ok && s.loaded;
  }
  const DriverVerdict verdict = cuda_driver_verdict(*nvidia_smi_release);
  if (!verdict.ok) {
    r += "NOT USABLE: " + verdict.message + "\n";
    return 1;
  }
  r += "driver check: " + verdict.message + "\n";
  if (!list_gpus(r)) return 1;
  if (!vendor_ok) {
    r += "NOT USABLE as configured by default: cuDNN or cuBLASLt is missing (see above); --conv.impl custom "
         "trains without them\n";
    return 1;
  }
  r += "usable\n";
  return 0;
}
