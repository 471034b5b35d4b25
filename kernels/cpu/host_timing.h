// Host-side PhaseTimer and HostMirror (kernels/backend.h) for the CPU backend, whose ops finish before they
// return: a phase mark is the host's steady clock, and a mirror's copy lands at refresh().
#pragma once
#include <memory>

#include "kernels/backend.h"

namespace cnn {

std::unique_ptr<PhaseTimer> make_host_phase_timer();
std::unique_ptr<HostMirror> make_host_mirror(const void* src, size_t bytes);

}  // namespace cnn
