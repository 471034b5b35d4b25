// Per-GPU figures from NVML: utilisation, memory used/total, temperature and power, sampled by a thread and
// averaged per logging window. libnvidia-ml.so.1 ships with the NVIDIA driver, not the CUDA toolkit, so it is
// loaded with dlopen and never linked: a machine without the driver simply has no GPU figures. Host C++ only
// (the few NVML types and entry points used are declared in nvml.cpp, NVML's stable C ABI), so this builds and
// is tested without CUDA.
//
// Test-only: CNNTRAIN_TEST_NVML=PATH makes the trainer load PATH instead of libnvidia-ml.so.1 (the fake NVML of
// tests/obs/fake_nvml.c, scripted figures) and lets a rank without a GPU sample a device by index; see
// docs/observability.md. Not for production use.
#pragma once
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cnn {

// One reading, or a window's means. NaN: unknown (the query failed or is not supported by the device).
struct GpuFigures {
  double util_pct = NAN;   // percent of the last sample period in which a kernel ran (nvmlDeviceGetUtilizationRates)
  double mem_used = NAN;   // bytes (nvmlDeviceGetMemoryInfo: all processes' allocations on the device)
  double mem_total = NAN;  // bytes
  double temp_c = NAN;     // GPU die, degrees Celsius
  double power_w = NAN;    // board power draw, watts (NVML reports milliwatts)
};
constexpr int kNumGpuFigures = 5;
// The figures as an array, in the order of GpuFigures, and the metrics.jsonl field names of each.
double& gpu_figure(GpuFigures& f, int i);
double gpu_figure(const GpuFigures& f, int i);
const char* gpu_figure_name(int i);  // "gpu_util_pct", "gpu_mem_used", "gpu_mem_total", "gpu_temp_c", "gpu_power_w"

class NvmlDevice {
 public:
  // Loads the NVML library `path` (dlopen), initialises NVML and finds the device: by PCI bus id
  // ("0000:3b:00.0", as CUDA reports it) when `pci_bus_id` is not empty, else by NVML index. Returns null with
  // the reason in *why (the dlerror, or the NVML function and nvmlErrorString).
  static std::unique_ptr<NvmlDevice> open(const std::string& path, const std::string& pci_bus_id, unsigned index,
                                          std::string* why);
  ~NvmlDevice();  // nvmlShutdown, dlclose
  NvmlDevice(const NvmlDevice&) = delete;
  NvmlDevice& operator=(const NvmlDevice&) = delete;

  // The device's name (nvmlDeviceGetName), e.g. "NVIDIA H100 80GB HBM3".
  const std::string& name() const { return name_; }
  // One reading. A figure whose query fails stays NaN; the first failing query's name and reason go to *why.
  GpuFigures read(std::string* why) const;

  struct Api;  // the resolved entry points (nvml.cpp)

 private:
  NvmlDevice() = default;
  void* lib_ = nullptr;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;  // nvmlDevice_t
  std::string name_;
};

// Samples a device every `period_s` seconds on its own thread (the first reading at once) and averages the
// readings per window. NVML calls never run on the training thread.
class GpuSampler {
 public:
  // period_s <= 0: no thread; readings only through sample_now() (tests).
  GpuSampler(std::unique_ptr<NvmlDevice> dev, double period_s);
  ~GpuSampler();  // stops and joins the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  const NvmlDevice& device() const { return *dev_; }
  void sample_now();
  // Closes the window: each figure's mean over the readings since the last take() that had it; where no reading
  // had it in this window (a window shorter than the period), the latest known value.
  GpuFigures take();
  // The first query failure seen so far, once ("" otherwise): a device that does not report power, say.
  std::string take_problem();

 private:
  void run(double period_s);
  std::unique_ptr<NvmlDevice> dev_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  double sum_[kNumGpuFigures] = {};
  int count_[kNumGpuFigures] = {};
  GpuFigures last_;
  std::string problem_;
  bool problem_reported_ = false;
  std::thread thread_;
};

}  // namespace cnn
