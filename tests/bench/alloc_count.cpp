#include "tests/bench/alloc_count.h"

#include <atomic>
#include <cerrno>
#include <cstddef>

// glibc's internal entry points: the definitions below interpose the public names for every library in the
// process and forward here.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<uint64_t> g_allocs{0};
inline void count() { g_allocs.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

extern "C" {
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  count();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t al, size_t n) {
  count();
  return __libc_memalign(al, n);
}
void* aligned_alloc(size_t al, size_t n) {
  count();
  return __libc_memalign(al, n);
}
int posix_memalign(void** out, size_t al, size_t n) {
  count();
  void* p = __libc_memalign(al, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace cnn::bench {
uint64_t allocation_count() { return g_allocs.load(std::memory_order_relaxed); }
}  // namespace cnn::bench
