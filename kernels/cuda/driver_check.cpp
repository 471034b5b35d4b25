// The driver-versus-runtime verdict of kernels/driver_check.h.
#include "kernels/cuda/driver_check.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/base/error.h"

namespace cnn {

namespace {

std::string cuda_text(int v) { return strprintf("%d.%d", v / 1000, v % 1000 / 10); }

// The newest CUDA major version a driver branch runs (its release's first number: 535 for 535.104.05).
int max_cuda_major(int branch) {
  for (int major = 13; major >= 11; --major)
    if (branch >= min_driver_branch(major)) return major;
  return 0;
}

std::string ways_out(int runtime) {
  const int major = runtime / 1000, minor = runtime % 1000 / 10;
  return strprintf("Ways out: install NVIDIA driver >= %d; or, on datacenter GPUs (A100, H100, ...), NVIDIA's CUDA "
                   "forward-compatibility package cuda-compat-%d-%d, which lets an older driver run CUDA %d.%d (put "
                   "/usr/local/cuda-%d.%d/compat on LD_LIBRARY_PATH); or run a cnntrain built with a CUDA toolkit "
                   "the driver supports (make NVCC=/path/to/that/nvcc)", min_driver_branch(major), major, minor, major,
                   minor, major, minor);
}

}  // namespace

int min_driver_branch(int cuda_major) {
  switch (cuda_major) {
    case 13: return 580;
    case 12: return 525;
    case 11: return 450;
    default: return 0;
  }
}

std::string nvrm_release(const std::string& proc_text) {
  // The first word made of digits and dots (at least one) on the NVRM line: "x86_64" and the date are not.
  std::istringstream line(proc_text.substr(0, proc_text.find('\n')));
  if (proc_text.compare(0, 12, "NVRM version") != 0) return "";
  for (std::string word; line >> word;)
    if (std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos &&
        word.find_first_not_of("0123456789.") == std::string::npos)
      return word;
  return "";
}

std::string read_driver_release() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::stringstream text;
  text << in.rdbuf();
  return nvrm_release(text.str());
}

DriverVerdict judge_driver(int driver_cuda, const std::string& driver_release, int runtime) {
  const int need = runtime / 1000;
  const std::string rt = cuda_text(runtime);
  const std::string needs =
      strprintf("this build's CUDA runtime %s needs driver >= %d", rt.c_str(), min_driver_branch(need));
  const std::string release = driver_release.empty() ? "" : "driver " + driver_release;
  if (driver_cuda > 0) {
    const std::string found = "the NVIDIA driver supports CUDA " + cuda_text(driver_cuda) +
                              (release.empty() ? "" : " (" + release + ")");
    if (driver_cuda / 1000 < need) return {false, found + "; " + needs + ". " + ways_out(runtime)};
    if (driver_cuda < runtime)
      return {true, found + "; this build's CUDA runtime " + rt + " runs on it through CUDA minor-version "
                        "compatibility (its PTX for GPUs newer than sm_90 needs a driver of CUDA " + rt + ")"};
    return {true, found + "; this build's CUDA runtime is " + rt};
  }
  const int branch = std::atoi(driver_release.c_str());
  if (branch > 0 && branch < min_driver_branch(need))
    return {false, strprintf("the NVIDIA %s supports CUDA %d at most; %s. ", release.c_str(), max_cuda_major(branch),
                             needs.c_str()) + ways_out(runtime)};
  if (branch > 0)
    return {false, "the NVIDIA " + release + " is installed, but the CUDA runtime cannot load its library "
                   "libcuda.so.1: the driver's user-space libraries are not on the loader path (in a container: "
                   "start it through the NVIDIA container toolkit, e.g. docker run --gpus all)"};
  return {false, "no NVIDIA driver: the CUDA runtime cannot load libcuda.so.1 and no driver is loaded "
                 "(/proc/driver/nvidia/version is missing); " + needs + ". Install the NVIDIA driver (>= " +
                 std::to_string(min_driver_branch(need)) + "), or use --device cpu (or emu, the SIMT emulator)"};
}

}  // namespace cnn
