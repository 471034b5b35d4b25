// Host memory for the fast CPU backend's tensors and oneDNN's buffers (kernels/cpu/cpu_backend.cpp,
// kernels/cpu/dnnl_ops.cpp).
#pragma once
#include <cstddef>

namespace cnn {

// `bytes` aligned to `align` (a power of two, at least sizeof(void*)); nullptr when out of memory; release with
// std::free. Blocks of 2 MiB and more are aligned to 2 MiB and advised as transparent huge pages (madvise
// MADV_HUGEPAGE: Debian's default THP mode, "madvise", gives huge pages only to regions that ask). A training
// step walks all its activations and gradients (ResNet-20 at batch 128: ~0.5 GB), and with 4 KiB pages the
// convolutions and batch norm stall on TLB misses: huge pages make a ResNet-20 step 4-7% faster and change no
// value (docs/perf.md). Only pages touched are backed, so the alignment wastes no memory.
// CNNTRAIN_HUGE_PAGES=0 leaves every block on ordinary pages (docs/environment.md).
void* host_alloc(size_t bytes, size_t align);

}  // namespace cnn
