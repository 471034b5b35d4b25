#include "tests/common/backend_targets.h"

#include <cstdlib>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "src/base/error.h"

namespace cnn::test {

namespace {
const uint64_t kSchedules[] = {0, 101, 202, 303};
// Seeded schedules also keep this many blocks resident at once, their threads interleaved (races between
// blocks), and scramble wmma fragment mappings (kernels depending on one).
constexpr int kSeededResidentBlocks = 4;
}  // namespace

std::vector<BackendTarget> backend_targets(size_t emu_schedules) {
  std::vector<BackendTarget> v;
  v.push_back({"cpu_t1", TargetKind::kCpu, 1});
  v.push_back({"cpu_t3", TargetKind::kCpu, 3});
  for (size_t i = 0; i < emu_schedules && i < std::size(kSchedules); ++i)
    v.push_back({kSchedules[i] == 0 ? "emu_default" : "emu_seed" + std::to_string(kSchedules[i]), TargetKind::kEmu,
                 1, kSchedules[i]});
  v.push_back({"cuda", TargetKind::kGpu});
  v.push_back({"cuda_vendor", TargetKind::kGpuVendor});
  return v;
}

bool gpu_required() {
  const char* v = std::getenv("CNNTRAIN_REQUIRE_GPU");
  return v && v[0] == '1';
}

std::unique_ptr<Backend> make_gpu_test_backend(bool vendor, std::string* reason, bool deterministic) {
#ifdef CNN_WITH_CUDA
  GpuOptions o;
  o.conv_impl = vendor ? ConvImpl::kCudnn : ConvImpl::kCustom;
  o.vendor_batchnorm = vendor;  // the vendor target checks cuDNN's batch norm too (off by default in cnntrain)
  o.tf32 = false;
  o.deterministic = deterministic;
  try {
    return make_cuda_backend(0, o);
  } catch (const Error& e) {
    *reason = std::string("no GPU: ") + e.what();
  }
#else
  (void)vendor;
  (void)deterministic;
  *reason = "built without CUDA (USE_CUDA=0 or no nvcc)";
#endif
  return nullptr;
}

std::unique_ptr<Backend> make_reference_backend() { return make_cpu_backend(1, CpuKernels::kReference); }

TargetBackend::TargetBackend(const BackendTarget& t, const GpuOptions& emu_opts) : t_(t) {
  switch (t.kind) {
    case TargetKind::kReference:
      be_ = make_reference_backend();
      break;
    case TargetKind::kCpu:
      // Test shapes are small; without this the fast backend would run them all on one thread
      // (kernels/cpu/dnnl_ops.cpp) and the parallel paths would go untested.
      setenv("CNNTRAIN_MIN_PARALLEL_MFLOP", "0", 1);
      be_ = make_cpu_backend(t.threads, CpuKernels::kFast);
      unsetenv("CNNTRAIN_MIN_PARALLEL_MFLOP");
      break;
    case TargetKind::kEmu:
      simt::set_schedule_seed(t.simt_seed);
      simt::set_resident_blocks(t.simt_seed != 0 ? kSeededResidentBlocks : 1);
      simt::set_wmma_scramble(t.simt_seed != 0);
      emu_bytes_before_ = simt::device_bytes_in_use();
      be_ = make_emu_backend(emu_opts);
      break;
    case TargetKind::kGpu:
    case TargetKind::kGpuVendor:
      be_ = make_gpu_test_backend(t.kind == TargetKind::kGpuVendor, &skip_);
      if (!be_ && gpu_required()) ADD_FAILURE() << "CNNTRAIN_REQUIRE_GPU=1: " << skip_;
      break;
  }
}

TargetBackend::~TargetBackend() {
  be_.reset();
  if (t_.kind != TargetKind::kEmu) return;
  EXPECT_EQ(simt::device_bytes_in_use(), emu_bytes_before_) << "the emulated backend leaked device memory";
  simt::set_schedule_seed(0);
  simt::set_resident_blocks(1);
  simt::set_wmma_scramble(false);
}

}  // namespace cnn::test
