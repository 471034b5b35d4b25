// The CUDA backend's PhaseTimer (events on the compute stream) and HostMirror (pinned buffer + event), for
// the nvcc build and the emulator alike (kernels/backend.h describes both interfaces).
#pragma once
#include <memory>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_common.h"

namespace cnn {
namespace CNN_CUDA_NS {

std::unique_ptr<PhaseTimer> make_event_phase_timer(cudaStream_t stream);
std::unique_ptr<HostMirror> make_pinned_mirror(const void* d_src, size_t bytes, cudaStream_t stream);

}  // namespace CNN_CUDA_NS
}  // namespace cnn
