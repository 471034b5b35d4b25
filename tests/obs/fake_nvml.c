/* A fake NVML for tests only: a shared object with the NVML entry points cnntrain resolves (src/obs/nvml.cpp),
 * returning scripted figures, so CI (no GPU, no driver) drives the real dlopen/dlsym and sampling code.
 * cnntrain loads it instead of libnvidia-ml.so.1 when CNNTRAIN_TEST_NVML names it. Never install it.
 *
 * Devices 0..N-1 (FAKE_NVML_DEVICES, default 2); device i has PCI bus id 0000:0i:00.0 (bus = i). Reading k
 * (k = 0, 1, ... per device and query, counted from the nvmlInit_v2 that initialised the library) of device i
 * alternates between two values, so a window's mean of an even number of readings is the midpoint:
 *   utilisation  30 + i %, 50 + i %                    (mean 40 + i)
 *   memory used  (1 + i) GiB, (1 + i) GiB + 512 MiB     total 16 GiB
 *   temperature  60 + i C, 62 + i C
 *   power        (150 + i) W, (160 + i) W               (as milliwatts)
 * FAKE_NVML_INIT_ERROR=CODE makes nvmlInit_v2 fail with CODE; FAKE_NVML_NO_POWER=1 makes the power query
 * NVML_ERROR_NOT_SUPPORTED (some boards do not report power). Calls before nvmlInit_v2 or after the matching
 * nvmlShutdown fail with NVML_ERROR_UNINITIALIZED, as the real library's do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6 };
enum { kMaxDevices = 16, kQueries = 4 };

struct nvmlDevice_st {
  int index;
};
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

static struct nvmlDevice_st devices[kMaxDevices];
static unsigned reads[kMaxDevices][kQueries];
static int init_count;

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

static int device_count(void) {
  int n = env_int("FAKE_NVML_DEVICES", 2);
  return n < 0 ? 0 : n > kMaxDevices ? kMaxDevices : n;
}

/* Which of the two scripted values reading k of query q on device d takes (0 or 1). */
static unsigned next_phase(const struct nvmlDevice_st* d, int q) {
  return __atomic_fetch_add(&reads[d->index][q], 1, __ATOMIC_RELAXED) % 2;
}

static int check(const struct nvmlDevice_st* d) {
  if (__atomic_load_n(&init_count, __ATOMIC_RELAXED) <= 0) return kUninitialized;
  return d && d >= devices && d < devices + device_count() ? kSuccess : kInvalidArgument;
}

int nvmlInit_v2(void) {
  int err = env_int("FAKE_NVML_INIT_ERROR", 0);
  if (err) return err;
  if (__atomic_load_n(&init_count, __ATOMIC_RELAXED) == 0) {
    for (int i = 0; i < kMaxDevices; ++i) devices[i].index = i;
    memset(reads, 0, sizeof reads);
  }
  __atomic_add_fetch(&init_count, 1, __ATOMIC_RELAXED);
  return kSuccess;
}

int nvmlShutdown(void) {
  if (__atomic_load_n(&init_count, __ATOMIC_RELAXED) <= 0) return kUninitialized;
  __atomic_sub_fetch(&init_count, 1, __ATOMIC_RELAXED);
  return kSuccess;
}

const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNotFound: return "Not Found";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, struct nvmlDevice_st** out) {
  if (init_count <= 0) return kUninitialized;
  if (!out || index >= (unsigned)device_count()) return kInvalidArgument;
  *out = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* id, struct nvmlDevice_st** out) {
  unsigned domain, bus, dev, fn;
  if (init_count <= 0) return kUninitialized;
  if (!id || !out || sscanf(id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return kInvalidArgument;
  if (domain != 0 || dev != 0 || fn != 0 || bus >= (unsigned)device_count()) return kNotFound;
  *out = &devices[bus];
  return kSuccess;
}

int nvmlDeviceGetName(struct nvmlDevice_st* d, char* name, unsigned length) {
  int r = check(d);
  if (r) return r;
  snprintf(name, length, "Fake NVML GPU %d", d->index);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(struct nvmlDevice_st* d, nvmlUtilization_t* u) {
  int r = check(d);
  if (r) return r;
  u->gpu = 30 + d->index + 20 * next_phase(d, 0);
  u->memory = u->gpu / 2;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(struct nvmlDevice_st* d, nvmlMemory_t* m) {
  int r = check(d);
  if (r) return r;
  const unsigned long long gib = 1ull << 30;
  m->total = 16 * gib;
  m->used = (1 + d->index) * gib + next_phase(d, 1) * (gib / 2);
  m->free = m->total - m->used;
  return kSuccess;
}

int nvmlDeviceGetTemperature(struct nvmlDevice_st* d, int sensor, unsigned* celsius) {
  int r = check(d);
  if (r) return r;
  if (sensor != 0) return kInvalidArgument; /* NVML_TEMPERATURE_GPU is the only sensor */
  *celsius = 60 + d->index + 2 * next_phase(d, 2);
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(struct nvmlDevice_st* d, unsigned* milliwatts) {
  int r = check(d);
  if (r) return r;
  if (env_int("FAKE_NVML_NO_POWER", 0)) return kNotSupported;
  *milliwatts = 1000 * (150 + d->index + 10 * next_phase(d, 3));
  return kSuccess;
}
