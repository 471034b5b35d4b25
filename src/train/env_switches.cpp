#include "src/train/env_switches.h"

#include <cstdlib>

#include "src/obs/runlog.h"

namespace cnn {

const std::vector<EnvVar>& known_env_vars() {
  static const std::vector<EnvVar> vars = {
      // Read by kernels/cpu/cpu_backend.cpp, kernels/cpu/dnnl_ops.cpp, kernels/cuda/kernel_settings.cu.
      {"CNNTRAIN_CPU_KERNELS", EnvKind::kResults, ""},
      {"CNNTRAIN_WINOGRAD", EnvKind::kResults, ""},
      {"CNNTRAIN_WINOGRAD_MIN_PIXELS", EnvKind::kResults, ""},
      {"CNNTRAIN_BLOCKED_LAYOUT", EnvKind::kResults, ""},
      {"CNNTRAIN_SMALL_CONV", EnvKind::kResults, ""},
      {"CNNTRAIN_GEMM_CONV", EnvKind::kResults, ""},
      {"CNNTRAIN_AVX512_KERNELS", EnvKind::kResults, ""},
      {"CNNTRAIN_MIN_PARALLEL_MFLOP", EnvKind::kResults, ""},
      {"CNNTRAIN_CUDA_GEMM", EnvKind::kResults, ""},
      // The SIMT emulator (kernels/simt/): block and thread order, and with it the order of atomic sums.
      {"CNNTRAIN_SIMT_SEED", EnvKind::kResults, ""},
      {"CNNTRAIN_SIMT_RESIDENT_BLOCKS", EnvKind::kResults, ""},
      {"CNNTRAIN_SIMT_SM_COUNT", EnvKind::kResults, ""},
      {"CNNTRAIN_SIMT_DEFER", EnvKind::kResults, ""},
      {"CNNTRAIN_TEST_DELAY", EnvKind::kTestHook, "a rank sleeps in one phase of every step"},
      {"CNNTRAIN_TEST_NAN", EnvKind::kTestHook, "a NaN is written into one parameter's gradient"},
      {"CNNTRAIN_TEST_NVML", EnvKind::kTestHook, "GPU statistics come from a stand-in NVML library"},
      {"CNNTRAIN_TEST_CKPT_FAULT", EnvKind::kTestHook, "a checkpoint write, open or stat fails on one rank"},
      {"CNNTRAIN_TEST_CKPT_SLEEP_MS", EnvKind::kTestHook, "each checkpoint waits before it is committed"},
      {"CNNTRAIN_NCCL_EMU_FAULT", EnvKind::kTestHook, "the emulated NCCL stalls or fails a collective"},
      {"CNNTRAIN_SIMT_WMMA_SCRAMBLE", EnvKind::kTestHook, "the emulator scrambles wmma fragment layouts"},
      {"CNNTRAIN_SIMT_STRICT_DEVICE", EnvKind::kTestHook, "the emulator fails CUDA calls on an unbound thread"},
      {"CNNTRAIN_CKPT_IO", EnvKind::kSetting, ""},
      {"CNNTRAIN_HUGE_PAGES", EnvKind::kSetting, ""},
      {"CNNTRAIN_CPU_SPIN_US", EnvKind::kSetting, ""},
      {"CNNTRAIN_CUDA_PLUGIN", EnvKind::kSetting, ""},
      {"CNNTRAIN_CUDA_LIBS", EnvKind::kSetting, ""},
      {"CNNTRAIN_PYTHON", EnvKind::kSetting, ""},
      {"CNNTRAIN_SIMT_QUIET", EnvKind::kSetting, ""},
      {"CNNTRAIN_SIMT_CONTEXT", EnvKind::kSetting, ""},
      {"CNNTRAIN_NCCL_EMU_SEED", EnvKind::kSetting, ""},
  };
  return vars;
}

std::vector<std::string> env_set(EnvKind kind) {
  std::vector<std::string> set;
  for (const EnvVar& v : known_env_vars())
    if (const char* value = std::getenv(v.name); value && v.kind == kind)
      set.push_back(std::string(v.name) + "=" + value);
  return set;
}

void log_env_switches(RunLog& log) {
  std::string list;
  for (const std::string& e : env_set(EnvKind::kResults)) list += (list.empty() ? "" : ", ") + e;
  if (!list.empty()) log.info("environment that changes results (docs/environment.md): %s", list.c_str());
  for (const EnvVar& v : known_env_vars())
    if (const char* value = std::getenv(v.name); value && v.kind == EnvKind::kTestHook)
      log.warn("test hook armed: %s=%s (%s); this run's results are not production ones", v.name, value, v.what);
}

void add_env_switches(Json& start) {
  const std::vector<std::string> env = env_set(EnvKind::kResults), hooks = env_set(EnvKind::kTestHook);
  if (!env.empty()) start.add("env", env);
  if (!hooks.empty()) start.add("test_hooks", hooks);
}

}  // namespace cnn
