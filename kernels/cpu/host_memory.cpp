#include "kernels/cpu/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace cnn {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

bool huge_pages_wanted() {
  static const bool on = [] {
    const char* e = std::getenv("CNNTRAIN_HUGE_PAGES");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

}  // namespace

void* host_alloc(size_t bytes, size_t align) {
  const bool huge = bytes >= kHugePage && huge_pages_wanted();
  void* p = nullptr;
  if (posix_memalign(&p, huge && align < kHugePage ? kHugePage : align, bytes ? bytes : 1) != 0) return nullptr;
  // Advice only: where the kernel has THP off ("never") it fails and the block keeps ordinary pages.
  if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace cnn
