#include "tests/common/test_util.h"

#include <cstdlib>
#include <filesystem>

namespace cnn::test {

TempDir::TempDir() {
  char tmpl[] = "/tmp/cnntrain-test-XXXXXX";
  const char* p = ::mkdtemp(tmpl);
  if (!p) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace cnn::test
