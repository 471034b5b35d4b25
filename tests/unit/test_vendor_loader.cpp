// The run-time search for cuDNN, cuBLASLt and NCCL (kernels/cuda/vendor/vendor_loader.h) against fake libraries
// (tests/unit/fake_vendor_lib.c, built by kernels/cuda/cuda.mk with chosen version numbers) placed in scratch
// directories: the search order, the first usable library winning, libraries of another CUDA or library major
// version refused by name, and a missing library reported with every place tried and what to install.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kernels/cuda/vendor/vendor_loader.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using gpu::SearchPlace;
using gpu::VendorLib;
using gpu::VendorLoader;
using gpu::VendorSearchEnv;
namespace fs = std::filesystem;

// What the plugin of a CUDA 13 build passes.
const gpu::VendorBuild kBuild{13000, 9, 13, 2};

// Copies the fake `variant` (a directory of $(VENDOR_FAKES)) into dir, creating it.
void place(const std::string& variant, const std::string& dir) {
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(std::string(CNN_VENDOR_FAKES) + "/" + variant))
    fs::copy_file(f.path(), dir + "/" + f.path().filename().string(), fs::copy_options::overwrite_existing);
}

// A search that looks only where the test says: no system loader path, no /usr/local/cuda.
VendorSearchEnv only(std::vector<std::string> dirs) {
  VendorSearchEnv env;
  env.user_dirs = std::move(dirs);
  env.system_path = false;
  env.cuda_home = "";
  return env;
}

std::string load_error(VendorLoader& loader, VendorLib lib) {
  try {
    loader.handle(lib);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitFailure);
    return e.what();
  }
  ADD_FAILURE() << "the library loaded";
  return "";
}

TEST(VendorLoader, SearchOrderIsUserDirsPluginDirWheelsSystemThenCudaHome) {
  VendorSearchEnv env;
  env.user_dirs = {"/a", "/b"};
  env.plugin_dir = "/bundle/lib";
  env.site_packages = {"/venv/site-packages", "/usr/lib/python3/dist-packages"};
  env.cuda_home = "/usr/local/cuda";
  std::vector<std::string> dirs;
  for (const SearchPlace& p : gpu::vendor_search_places(VendorLib::kCudnn, kBuild, env)) dirs.push_back(p.dir);
  EXPECT_EQ(dirs, (std::vector<std::string>{"/a", "/b", "/bundle/lib", "/venv/site-packages/nvidia/cudnn/lib",
                                            "/usr/lib/python3/dist-packages/nvidia/cudnn/lib", "",
                                            "/usr/local/cuda/lib64"}));
  // cuBLAS's CUDA 13 wheel shares nvidia/cu13/lib with the other toolkit wheels; NCCL has its own.
  dirs.clear();
  env.site_packages.resize(1);
  for (const SearchPlace& p : gpu::vendor_search_places(VendorLib::kCublasLt, kBuild, env)) dirs.push_back(p.dir);
  EXPECT_EQ(dirs, (std::vector<std::string>{"/a", "/b", "/bundle/lib", "/venv/site-packages/nvidia/cublas/lib",
                                            "/venv/site-packages/nvidia/cu13/lib", "", "/usr/local/cuda/lib64"}));
  EXPECT_EQ(gpu::vendor_search_places(VendorLib::kNccl, kBuild, env)[3].dir, "/venv/site-packages/nvidia/nccl/lib");
  EXPECT_EQ(gpu::vendor_soname(VendorLib::kCudnn, kBuild), "libcudnn.so.9");
  EXPECT_EQ(gpu::vendor_soname(VendorLib::kCublasLt, kBuild), "libcublasLt.so.13");
  EXPECT_EQ(gpu::vendor_soname(VendorLib::kNccl, kBuild), "libnccl.so.2");
}

TEST(VendorLoader, LoadsTheFirstDirectoryHoldingTheLibraryAndResolvesItsFunctions) {
  test::TempDir tmp;
  place("cudnn9-cuda13", tmp.file("second"));
  place("cudnn9-cuda13", tmp.file("third"));
  VendorLoader loader(kBuild, only({tmp.file("first"), tmp.file("second"), tmp.file("third")}));
  const gpu::VendorLibStatus s = loader.status(VendorLib::kCudnn);
  ASSERT_TRUE(s.loaded) << s.error;
  EXPECT_EQ(s.path, tmp.file("second") + "/libcudnn.so.9");
  EXPECT_EQ(s.version, "cuDNN 9.13.0 for CUDA 13.0");
  auto version = reinterpret_cast<size_t (*)()>(loader.symbol(VendorLib::kCudnn, "cudnnGetVersion"));
  EXPECT_EQ(version(), 91300u);
  EXPECT_EQ(loader.handle(VendorLib::kCudnn), loader.handle(VendorLib::kCudnn));
  // A function this build calls but the library lacks is named with the file.
  test::TempDir other;
  place("nccl2", other.path());
  VendorLoader nccl(kBuild, only({other.path()}));
  EXPECT_EQ(nccl.status(VendorLib::kNccl).version, "NCCL 2.28.9");
  try {
    nccl.symbol(VendorLib::kNccl, "ncclAllReduce");
    ADD_FAILURE() << "a missing function resolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(other.path() + "/libnccl.so.2"), std::string::npos) << e.what();
  }
}

TEST(VendorLoader, RefusesCudnnBuiltForAnotherCudaMajorVersionByName) {
  test::TempDir tmp;
  place("cudnn9-cuda12", tmp.file("old"));
  VendorLoader loader(kBuild, only({tmp.file("old")}));
  const std::string msg = load_error(loader, VendorLib::kCudnn);
  for (const std::string& want : {tmp.file("old") + "/libcudnn.so.9", std::string("cuDNN 9.1.0 built for CUDA 12.4"),
                                  std::string("CUDA runtime is 13.0"), std::string("none usable"),
                                  std::string("pip install nvidia-cudnn-cu13"), std::string("libcudnn9-cuda-13")})
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in:\n" << msg;
  EXPECT_FALSE(loader.status(VendorLib::kCudnn).loaded);
  // A right one later in the search is taken.
  place("cudnn9-cuda13", tmp.file("new"));
  VendorLoader second(kBuild, only({tmp.file("old"), tmp.file("new")}));
  EXPECT_EQ(second.status(VendorLib::kCudnn).path, tmp.file("new") + "/libcudnn.so.9");
}

TEST(VendorLoader, RefusesAnotherLibraryMajorVersionUnderTheExpectedName) {
  test::TempDir tmp;
  place("cudnn8-cuda13", tmp.path());
  VendorLoader loader(kBuild, only({tmp.path()}));
  const std::string msg = load_error(loader, VendorLib::kCudnn);
  EXPECT_NE(msg.find("it is cuDNN 8.9.7; this build needs cuDNN 9"), std::string::npos) << msg;
}

TEST(VendorLoader, MissingLibraryListsEveryPlaceTriedAndTheFixes) {
  test::TempDir tmp;
  VendorSearchEnv env = only({tmp.file("a"), tmp.file("b")});
  env.plugin_dir = tmp.file("bundle");
  env.site_packages = {tmp.file("site")};
  env.cuda_home = tmp.file("cuda");
  VendorLoader loader(kBuild, env);
  const gpu::VendorLibStatus s = loader.status(VendorLib::kCudnn);  // never throws
  EXPECT_FALSE(s.loaded);
  const std::string msg = load_error(loader, VendorLib::kCudnn);
  EXPECT_EQ(msg, s.error);
  for (const std::string& want :
       {std::string("cuDNN 9 for CUDA 13 (libcudnn.so.9) not found"), tmp.file("a") + " ($CNNTRAIN_CUDA_LIBS): no",
        tmp.file("b") + " ($CNNTRAIN_CUDA_LIBS): no", tmp.file("bundle") + " (the plugin's directory): no",
        tmp.file("site") + "/nvidia/cudnn/lib (pip wheel): no", tmp.file("cuda") + "/lib64 (the CUDA toolkit): no",
        std::string("pip install nvidia-cudnn-cu13"), std::string("CNNTRAIN_CUDA_LIBS"),
        std::string("--conv.impl custom")})
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in:\n" << msg;
  // NCCL's message says who needs it, and cuBLASLt's names the CUDA 13 wheel.
  EXPECT_NE(loader.status(VendorLib::kNccl).error.find("only by multi-GPU runs"), std::string::npos);
  EXPECT_NE(loader.status(VendorLib::kCublasLt).error.find("pip install nvidia-cublas`"), std::string::npos);
}

TEST(VendorLoader, FindsPipWheelsOfTheActiveVirtualenvFromTheEnvironment) {
  test::TempDir tmp;
  const std::string site = tmp.file("venv/lib/python3.11/site-packages");
  place("cublaslt13", site + "/nvidia/cu13/lib");
  setenv("VIRTUAL_ENV", tmp.file("venv").c_str(), 1);
  setenv("CNNTRAIN_CUDA_LIBS", "/x::/y", 1);
  VendorSearchEnv env = VendorSearchEnv::from_process("/plugin");
  unsetenv("VIRTUAL_ENV");
  unsetenv("CNNTRAIN_CUDA_LIBS");
  EXPECT_EQ(env.user_dirs, (std::vector<std::string>{"/x", "/y"}));
  EXPECT_EQ(env.plugin_dir, "/plugin");
  ASSERT_FALSE(env.site_packages.empty());
  EXPECT_EQ(env.site_packages[0], site);
  env.system_path = false;
  env.cuda_home = "";
  VendorLoader loader(kBuild, env);
  const gpu::VendorLibStatus s = loader.status(VendorLib::kCublasLt);
  ASSERT_TRUE(s.loaded) << s.error;
  EXPECT_EQ(s.path, site + "/nvidia/cu13/lib/libcublasLt.so.13");
  EXPECT_EQ(s.version, "cuBLASLt 13.1.0 for CUDA 13.0");
}

}  // namespace
}  // namespace cnn
