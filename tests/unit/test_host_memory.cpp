// host_alloc (kernels/cpu/host_memory.h): blocks of 2 MiB and more are 2 MiB-aligned and advised as transparent
// huge pages, which the kernel shows as THPeligible on their mapping in /proc/self/smaps (whether huge pages are
// free at the moment does not matter to that flag); smaller blocks keep the alignment asked for and no advice.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cpu/host_memory.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// The THPeligible value of the mapping that holds `p`, or -1 when smaps has no such field or mapping.
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') > line.find(' ') && (head >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::atoi(line.c_str() + 12);
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s;
}

TEST(HostMemory, LargeBlocksAreHugePageAlignedAndAdvised) {
  const std::string mode = thp_mode();
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "transparent huge pages are off on this kernel (/sys/kernel/mm/transparent_hugepage/enabled: '"
                 << mode << "')";
  if (const char* e = std::getenv("CNNTRAIN_HUGE_PAGES"); e && std::strcmp(e, "0") == 0)
    GTEST_SKIP() << "CNNTRAIN_HUGE_PAGES=0 is set in this environment";
  const size_t big = (size_t{5} << 20) + 123;
  void* p = host_alloc(big, 64);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, big);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u) << "a 5 MiB block is not 2 MiB-aligned";
  const int eligible = thp_eligible(p);
  if (eligible < 0) {
    std::free(p);
    GTEST_SKIP() << "this kernel's /proc/self/smaps has no THPeligible field";
  }
  EXPECT_EQ(eligible, 1) << "the 5 MiB block's mapping is not advised for huge pages (mode " << mode << ")";
  std::free(p);
}

TEST(HostMemory, SmallBlocksKeepTheirAlignment) {
  for (size_t align : {size_t{64}, size_t{4096}}) {
    void* p = host_alloc(1000, align);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "alignment " << align;
    std::memset(p, 0, 1000);
    std::free(p);
  }
}

}  // namespace
}  // namespace cnn
