#include "src/obs/nvml.h"

#include <dlfcn.h>

#include <chrono>
#include <type_traits>

#include "src/base/error.h"

namespace cnn {

namespace {

// The subset of NVML's C ABI (nvml.h) used here. nvmlReturn_t is an enum (int); 0 is NVML_SUCCESS.
using NvmlReturn = int;
using NvmlHandle = void*;  // nvmlDevice_t: an opaque pointer
struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr unsigned kNvmlNameSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

const char* const kFigureNames[kNumGpuFigures] = {"gpu_util_pct", "gpu_mem_used", "gpu_mem_total", "gpu_temp_c",
                                                  "gpu_power_w"};

}  // namespace

struct NvmlDevice::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*by_pci_bus_id)(const char*, NvmlHandle*);
  NvmlReturn (*by_index)(unsigned, NvmlHandle*);
  NvmlReturn (*get_name)(NvmlHandle, char*, unsigned);
  NvmlReturn (*utilization)(NvmlHandle, NvmlUtilization*);
  NvmlReturn (*memory)(NvmlHandle, NvmlMemory*);
  NvmlReturn (*temperature)(NvmlHandle, int, unsigned*);
  NvmlReturn (*power)(NvmlHandle, unsigned*);
};

double& gpu_figure(GpuFigures& f, int i) {
  double* const v[kNumGpuFigures] = {&f.util_pct, &f.mem_used, &f.mem_total, &f.temp_c, &f.power_w};
  return *v[i];
}

double gpu_figure(const GpuFigures& f, int i) {
  const double v[kNumGpuFigures] = {f.util_pct, f.mem_used, f.mem_total, f.temp_c, f.power_w};
  return v[i];
}

const char* gpu_figure_name(int i) { return kFigureNames[i]; }

std::unique_ptr<NvmlDevice> NvmlDevice::open(const std::string& path, const std::string& pci_bus_id, unsigned index,
                                             std::string* why) {
  std::unique_ptr<NvmlDevice> d(new NvmlDevice);
  d->lib_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->lib_) {
    *why = strprintf("%s could not be loaded (%s); it ships with the NVIDIA driver", path.c_str(), ::dlerror());
    return nullptr;
  }
  d->api_ = std::make_unique<Api>();
  Api& a = *d->api_;
  bool missing = false;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(d->lib_, name));
    if (!fn && !missing) {
      *why = strprintf("%s has no %s (not an NVML library, or too old a driver)", path.c_str(), name);
      missing = true;
    }
  };
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.error_string, "nvmlErrorString");
  sym(a.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  sym(a.by_index, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.get_name, "nvmlDeviceGetName");
  sym(a.utilization, "nvmlDeviceGetUtilizationRates");
  sym(a.memory, "nvmlDeviceGetMemoryInfo");
  sym(a.temperature, "nvmlDeviceGetTemperature");
  sym(a.power, "nvmlDeviceGetPowerUsage");
  if (missing) {
    d->api_.reset();  // nothing to shut down
    return nullptr;
  }
  if (NvmlReturn r = a.init()) {
    *why = strprintf("nvmlInit_v2 failed: %s", a.error_string(r));
    d->api_.reset();
    return nullptr;
  }
  const NvmlReturn r = pci_bus_id.empty() ? a.by_index(index, &d->device_)
                                          : a.by_pci_bus_id(pci_bus_id.c_str(), &d->device_);
  if (r) {
    *why = pci_bus_id.empty()
               ? strprintf("nvmlDeviceGetHandleByIndex_v2(%u) failed: %s", index, a.error_string(r))
               : strprintf("nvmlDeviceGetHandleByPciBusId_v2(\"%s\") failed: %s", pci_bus_id.c_str(),
                           a.error_string(r));
    return nullptr;
  }
  char name[kNvmlNameSize] = {0};
  d->name_ = a.get_name(d->device_, name, kNvmlNameSize) == 0 ? name : "(unnamed GPU)";
  return d;
}

NvmlDevice::~NvmlDevice() {
  if (api_) api_->shutdown();
  if (lib_) ::dlclose(lib_);
}

GpuFigures NvmlDevice::read(std::string* why) const {
  GpuFigures f;
  const Api& a = *api_;
  auto ok = [&](NvmlReturn r, const char* fn) {
    if (r && why->empty()) *why = strprintf("%s: %s", fn, a.error_string(r));
    return r == 0;
  };
  NvmlUtilization u{};
  if (ok(a.utilization(device_, &u), "nvmlDeviceGetUtilizationRates")) f.util_pct = u.gpu;
  NvmlMemory m{};
  if (ok(a.memory(device_, &m), "nvmlDeviceGetMemoryInfo")) {
    f.mem_used = static_cast<double>(m.used);
    f.mem_total = static_cast<double>(m.total);
  }
  unsigned t = 0;
  if (ok(a.temperature(device_, kNvmlTemperatureGpu, &t), "nvmlDeviceGetTemperature")) f.temp_c = t;
  unsigned mw = 0;
  if (ok(a.power(device_, &mw), "nvmlDeviceGetPowerUsage")) f.power_w = mw / 1000.0;
  return f;
}

GpuSampler::GpuSampler(std::unique_ptr<NvmlDevice> dev, double period_s) : dev_(std::move(dev)) {
  if (period_s > 0) thread_ = std::thread([this, period_s] { run(period_s); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::run(double period_s) {
  const auto period = std::chrono::duration<double>(period_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    sample_now();
    lock.lock();
    cv_.wait_for(lock, period, [this] { return stop_; });
  }
}

void GpuSampler::sample_now() {
  std::string why;
  const GpuFigures f = dev_->read(&why);  // outside the lock: take() never waits for the driver
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kNumGpuFigures; ++i) {
    const double v = gpu_figure(f, i);
    if (std::isnan(v)) continue;
    sum_[i] += v;
    ++count_[i];
    gpu_figure(last_, i) = v;
  }
  if (!why.empty() && problem_.empty()) problem_ = why;
}

GpuFigures GpuSampler::take() {
  std::lock_guard<std::mutex> lock(mu_);
  GpuFigures out = last_;
  for (int i = 0; i < kNumGpuFigures; ++i) {
    if (count_[i] > 0) gpu_figure(out, i) = sum_[i] / count_[i];
    sum_[i] = 0;
    count_[i] = 0;
  }
  return out;
}

std::string GpuSampler::take_problem() {
  std::lock_guard<std::mutex> lock(mu_);
  if (problem_reported_) return "";
  problem_reported_ = !problem_.empty();
  return problem_;
}

}  // namespace cnn
