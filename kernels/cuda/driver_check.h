// Whether the NVIDIA driver can run this build's CUDA runtime: decided up front (cnntrain --gpu-info, and
// --device cuda before anything else touches the GPU), so that a driver older than the runtime stops the run
// within seconds with both versions and the ways out, instead of CUDA's bare "driver insufficient".
// Pure functions of version numbers and strings, unit-tested in tests/unit/test_driver_check.cpp.
#pragma once
#include <string>

namespace cnn {

struct DriverVerdict {
  bool ok = false;
  std::string message;  // one paragraph: what was found, what this build needs, and when !ok the ways out
};

// driver_cuda: cudaDriverGetVersion's answer (12020 = CUDA 12.2; 0 = the runtime found no driver library);
// driver_release: the driver's version ("535.104.05", from /proc/driver/nvidia/version or nvidia-smi; empty
// when unknown); runtime: the CUDA runtime the plugin was built with (CUDART_VERSION, 13000 = 13.0).
DriverVerdict judge_driver(int driver_cuda, const std::string& driver_release, int runtime);

// The oldest driver branch that runs CUDA `cuda_major` (580 for 13, 525 for 12, 450 for 11; 0 if unknown).
int min_driver_branch(int cuda_major);
// "535.104.05" from the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
// 535.104.05  Sat Aug 19 ..."); empty when it holds none.
std::string nvrm_release(const std::string& proc_text);
// The kernel module's release from /proc/driver/nvidia/version; empty without a loaded NVIDIA driver.
std::string read_driver_release();

// This machine's verdict for the plugin's CUDA runtime (kernels/cuda/vendor/vendor_runtime.cu; nvcc builds only):
// cudaDriverGetVersion, and the release from /proc/driver/nvidia/version or else `release_hint` (nvidia-smi).
DriverVerdict cuda_driver_verdict(const std::string& release_hint = "");

}  // namespace cnn
