// cnntrain --gpu-info (src/train/gpu_info.h).
#include "src/train/gpu_info.h"

#include <sys/wait.h>

#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "src/base/error.h"

namespace cnn {

namespace {

// nvidia-smi's driver versions (one line per GPU), capped at 20 s: a wedged driver can hang it. Returns
// false, with the reason in *text, when it is missing or fails.
bool query_nvidia_smi(std::string* text) {
  std::FILE* p = ::popen("command -v nvidia-smi >/dev/null 2>&1 || exit 127; "
                         "exec timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1", "r");
  if (!p) {
    *text = "cannot run a shell";
    return false;
  }
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) *text += buf;
  const int status = ::pclose(p);
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 127) *text = "not found";
  else if (rc == 124) *text = "timed out after 20 s";
  else if (rc != 0) *text = strprintf("failed (exit %d): %s", rc, text->c_str());
  return rc == 0 && !text->empty();
}

}  // namespace

int print_gpu_info(std::FILE* out) {
  std::string smi;
  const bool have_smi = query_nvidia_smi(&smi);
  std::fprintf(out, "nvidia-smi driver_version: %s\n", smi.c_str());
  std::string report;
  int rc = 1;
  try {
    rc = load_cuda_gpu_info(have_smi ? smi.substr(0, smi.find('\n')) : "", &report);
  } catch (const Error& e) {
    report = std::string("NOT USABLE: ") + e.what() + "\n";
  }
  std::fputs(report.c_str(), out);
  std::fflush(out);
  return rc;
}

}  // namespace cnn
