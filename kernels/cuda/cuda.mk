# CUDA backend (kernels/cuda/*.cu, and the NCCL collectives src/comm/*.cu). Always built against the SIMT emulator for --device emu (g++ only); with
# USE_CUDA on (auto: when nvcc is found) also by nvcc (sm_80 and sm_90 code plus compute_90 PTX, which the
# driver compiles for newer GPUs) for --device cuda, together with the cuDNN/cuBLASLt paths
# (kernels/cuda/vendor/*.cu: nvcc only), into the plugin
# $(BUILD)/libcnntrain-cuda.so. The plugin links the CUDA runtime statically and nothing else of NVIDIA's (never
# libcuda): cuDNN, cuBLASLt and NCCL are dlopened when first needed (kernels/cuda/vendor/vendor_loader.h), so it loads on a
# machine with only the driver. cnntrain dlopens the plugin for --device cuda only, so the trainer starts, and
# runs --device cpu, without any CUDA library. The plugin takes the base and comm layers' symbols (errors, MPI
# bootstrap, watchdog) from the executable.
#   make test-cuda        emu-vs-reference training (the kernels themselves: the backend sweep, tests/backend/)
#   make cuda-nvcc-check  nvcc build of every .cu; ptxas reports beside the objects in $(BUILD)/nvcc/
#   make cuda-link-check  the plugin and the test binaries need no cuDNN, cuBLASLt or NCCL at load time
#   make gpu-test         the sweep's and the training test's GPU instances and a one-rank NCCL allreduce
#                         (skipped without a GPU)
#   make test-cuda-asan   test-cuda and the backend sweep built with AddressSanitizer (out-of-bounds accesses
#                         in kernels), on demand

NVCC ?= nvcc
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_HOME ?= /usr/local/cuda
ifeq ($(USE_CUDA),auto)
  CUDA_ON := $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
else ifeq ($(USE_CUDA),1)
  CUDA_ON := 1
else
  CUDA_ON := 0
endif

CUDA_VENDOR_SRCS := $(wildcard kernels/cuda/vendor/*.cu)
# The NCCL implementation of Collectives lives with the other collectives in src/comm (its emulated object
# joins the comm layer).
CUDA_COMM_SRCS   := $(wildcard src/comm/*.cu)
CUDA_SRCS     := $(wildcard kernels/cuda/*.cu) $(CUDA_COMM_SRCS)
CUDA_EMU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.emu.o,$(CUDA_SRCS))
CUDA_GPU_OBJS := $(patsubst %.cu,$(BUILD)/nvcc/%.o,$(CUDA_SRCS) $(CUDA_VENDOR_SRCS))
# Host code the plugin carries itself (position-independent; base-layer symbols come from the executable).
CUDA_PIC_OBJS := $(patsubst %,$(BUILD)/pic/kernels/cuda/%.o,vendor/algo_select vendor/vendor_loader driver_check)
CUDA_GPU_LIB  := $(BUILD)/libcnngpu.a
CUDA_PLUGIN   := $(BUILD)/libcnntrain-cuda.so
CUDA_LINK     := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt
CUDA_SIMT_LIB := $(BUILD)/libsimt.a   # = $(SIMT_LIB) of kernels/simt/simt.mk, which is included after this file
CUDA_TEST     := $(BUILD)/tests/cuda_tests
CUDA_TEST_OBJS = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/cuda/*.cpp) $(TEST_COMMON_SRCS))

# The emulated backend is part of every build; everything linking libcnntrain also links the emulator.
$(KERNELS_LIB): $(filter $(BUILD)/obj/kernels/%,$(CUDA_EMU_OBJS))
$(COMM_LIB): $(filter $(BUILD)/obj/src/comm/%,$(CUDA_EMU_OBJS))
$(BINS) $(UNIT_TEST) $(MPI_TEST): $(CUDA_SIMT_LIB)
EXTRA_LDLIBS += $(CUDA_SIMT_LIB)

# Toggling USE_CUDA must rebuild what sees CNN_WITH_CUDA (setup.o, the CUDA tests) and the library: a stamp
# file holds the setting.
CUDA_STAMP := $(BUILD)/cuda-enabled.stamp
$(shell mkdir -p $(BUILD); [ "$$(cat $(CUDA_STAMP) 2>/dev/null)" = "$(CUDA_ON)" ] || echo $(CUDA_ON) > $(CUDA_STAMP))
$(BUILD)/obj/src/train/setup.o $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/cuda/*.cpp)): $(CUDA_STAMP)
ifeq ($(CUDA_ON),1)
$(BUILD)/obj/src/train/setup.o: EXTRA_CPPFLAGS += -DCNN_WITH_CUDA=1
$(BUILD)/obj/tests/cuda/%.o: EXTRA_CPPFLAGS += -DCNN_WITH_CUDA=1
# The one GPU test that calls the vendor libraries' API itself (their status names and versions, no device).
$(BUILD)/obj/tests/cuda/vendor_lazy_test.o: EXTRA_CPPFLAGS += -I$(CUDA_HOME)/include
# cnntrain exports its symbols so the plugin finds the base layer's (errors, logging) in it: one copy of
# their state per process.
$(BUILD)/cnntrain: EXTRA_LDFLAGS += -rdynamic
all: $(CUDA_PLUGIN)
TEST_BUILDS += $(CUDA_PLUGIN)
CUDA_TEST_GPU := $(CUDA_GPU_LIB)
CUDA_TEST_LINK := $(CUDA_LINK)
# The shared test helpers (tests/common/backend_targets.cpp) make the GPU backend directly: every test binary
# that links them links the GPU library too (after the layers it uses).
CUDA_TEST_EXTRA_LIBS := $(CUDA_GPU_LIB) $(KERNELS_LIB) $(COMM_LIB) $(BASE_LIB) $(CUDA_LINK)
$(UNIT_TEST) $(MPI_TEST): $(CUDA_GPU_LIB)
$(UNIT_TEST) $(MPI_TEST): EXTRA_LDLIBS += $(CUDA_TEST_EXTRA_LIBS)
endif

# nvcc objects; the ptxas report (registers, spills per kernel and arch) is kept next to each object.
$(BUILD)/nvcc/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 -O3 -I. -DCNN_WITH_CUDA=1 $(NVCC_GENCODE) -Xptxas -v -Xcompiler -fno-strict-aliasing,-fPIC \
	  -MMD -MP -MF $(@:.o=.d) -c $< -o $@ 2> $(@:.o=.ptxas.txt) || { cat $(@:.o=.ptxas.txt); exit 1; }

$(BUILD)/pic/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -fPIC -c $< -o $@

$(CUDA_GPU_LIB): $(CUDA_GPU_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

$(CUDA_PLUGIN): $(CUDA_GPU_LIB) $(CUDA_PIC_OBJS)
	$(CXX) -shared -pthread -Wl,-z,now -Wl,--whole-archive $(CUDA_GPU_LIB) -Wl,--no-whole-archive $(CUDA_PIC_OBJS) \
	  -o $@ $(CUDA_LINK)

$(CUDA_TEST): $(CUDA_TEST_OBJS) $(CUDA_TEST_GPU) $(LIB) $(CUDA_SIMT_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(GTEST_LIBS) -lgtest_main $(LDLIBS) $(CUDA_TEST_LINK)

.PHONY: test-cuda test-cuda-asan cuda-nvcc-check cuda-link-check gpu-test
test-cuda: $(CUDA_TEST)
	$(CUDA_TEST) --gtest_brief=1
	@# Without a GPU, CNNTRAIN_REQUIRE_GPU=1 must turn the GPU tests' skips into failures.
	@if ! nvidia-smi -L >/dev/null 2>&1; then \
	  if CNNTRAIN_REQUIRE_GPU=1 $(CUDA_TEST) --gtest_filter='Targets/Training.*/cuda' >/dev/null 2>&1; then \
	    echo "test-cuda: CNNTRAIN_REQUIRE_GPU=1 passed without a GPU" >&2; exit 1; fi; \
	  echo "test-cuda: CNNTRAIN_REQUIRE_GPU=1 fails the GPU tests on this GPU-less machine, as it must"; fi

# The same tests built with AddressSanitizer in $(BUILD)/asan (the arena then gives every tensor its own
# allocation): kernels reading or writing past a tensor are reported by source line. On demand only; it
# rebuilds the whole library.
test-cuda-asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT=-O1 USE_CUDA=0 EXTRA_CXXFLAGS=-fsanitize=address \
	  EXTRA_LDFLAGS=-fsanitize=address test-cuda test-backends

# Every Backend op and the training test on the real GPU ($(BACKEND_TEST): tests/backend/backend.mk, which
# adds it to the prerequisites).
gpu-test: $(CUDA_TEST)
	CNNTRAIN_REQUIRE_GPU=1 $(BACKEND_TEST) --gtest_filter='*__cuda*:*/cuda*'
	CNNTRAIN_REQUIRE_GPU=1 $(CUDA_TEST) --gtest_filter='*/cuda*:VendorSpeed.*:NcclOneRank.*'

# Compiles every .cu of the backend with nvcc (whether or not USE_CUDA links them in) and summarises the ptxas
# reports: a kernel that spills registers fails the check.
cuda-nvcc-check:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "cuda-nvcc-check: $(NVCC) not found, skipped"; \
	  echo "$(NVCC) not found" > "$${CNNTRAIN_PART_SKIP_FILE:-/dev/null}"; exit 0; fi; \
	$(MAKE) --no-print-directory $(CUDA_GPU_OBJS) >/dev/null || exit 1; \
	logs="$(CUDA_GPU_OBJS:.o=.ptxas.txt)"; \
	spills=$$(cat $$logs | grep -E '[1-9][0-9]* bytes spill (stores|loads)' | wc -l); \
	echo "cuda-nvcc-check: $(words $(CUDA_SRCS) $(CUDA_VENDOR_SRCS)) files build for sm_80 and sm_90 (+ compute_90 PTX);" \
	  "$$(cat $$logs | grep -c 'bytes spill stores') kernel reports, $$spills with spills"; \
	[ "$$spills" = 0 ] || { grep -B2 -E '[1-9][0-9]* bytes spill' $$logs; exit 1; }

# No load-time dependency on cuDNN, cuBLASLt or NCCL: none in the NEEDED entries of the plugin and of the
# binaries linking the GPU library, and no function of theirs left undefined in the plugin (one called without
# its kernels/cuda/vendor/vendor_lazy.h or src/comm/nccl_lazy.h macro would be resolved by the loader, so RTLD_NOW would fail without the library).
CUDA_LINKED_BINS = $(CUDA_PLUGIN) $(CUDA_TEST) $(UNIT_TEST) $(MPI_TEST) $(BACKEND_TEST)
cuda-link-check:
	@if [ $(CUDA_ON) != 1 ]; then echo "cuda-link-check: built without CUDA, skipped"; \
	  echo "built without CUDA" > "$${CNNTRAIN_PART_SKIP_FILE:-/dev/null}"; exit 0; fi; \
	$(MAKE) --no-print-directory $(CUDA_LINKED_BINS) >/dev/null || exit 1; \
	for f in $(CUDA_LINKED_BINS); do \
	  if readelf -d $$f | grep -E 'NEEDED.*lib(cudnn|cublas|nccl)'; then \
	    echo "cuda-link-check: $$f needs them" >&2; exit 1; fi; \
	done; \
	undef=$$(nm -D -u $(CUDA_PLUGIN) | grep -E ' (cudnn|cublas|nccl)' || true); \
	[ -z "$$undef" ] || { echo "cuda-link-check: $(CUDA_PLUGIN) leaves these undefined (add them to" \
	  "kernels/cuda/vendor/vendor_lazy.h or, for NCCL, src/comm/nccl_lazy.h):"; echo "$$undef"; exit 1; } >&2; \
	echo "cuda-link-check: $(words $(CUDA_LINKED_BINS)) binaries without NEEDED cuDNN/cuBLASLt/NCCL;" \
	  "the plugin leaves no function of theirs undefined"

# Stand-ins for cuDNN, cuBLASLt and NCCL in tests/unit/test_vendor_loader.cpp (any build): the version functions
# the loader probes, returning chosen numbers. $(VENDOR_FAKES)/<variant>/<soname>.
VENDOR_FAKES := $(BUILD)/tests/vendor_fakes
VENDOR_FAKE_LIBS := $(addprefix $(VENDOR_FAKES)/,cudnn9-cuda13/libcudnn.so.9 cudnn9-cuda12/libcudnn.so.9 \
  cudnn8-cuda13/libcudnn.so.9 cublaslt13/libcublasLt.so.13 nccl2/libnccl.so.2)
$(VENDOR_FAKES)/cudnn9-cuda13/%: FAKE_DEFS := -DFAKE_CUDNN -DFAKE_VERSION=91300 -DFAKE_CUDART=13000
$(VENDOR_FAKES)/cudnn9-cuda12/%: FAKE_DEFS := -DFAKE_CUDNN -DFAKE_VERSION=90100 -DFAKE_CUDART=12040
$(VENDOR_FAKES)/cudnn8-cuda13/%: FAKE_DEFS := -DFAKE_CUDNN -DFAKE_VERSION=8907 -DFAKE_CUDART=13000
$(VENDOR_FAKES)/cublaslt13/%: FAKE_DEFS := -DFAKE_CUBLASLT -DFAKE_VERSION=130100 -DFAKE_CUDART=13000
$(VENDOR_FAKES)/nccl2/%: FAKE_DEFS := -DFAKE_NCCL -DFAKE_VERSION=22809
$(VENDOR_FAKE_LIBS): tests/unit/fake_vendor_lib.c
	@mkdir -p $(@D)
	gcc -shared -fPIC -O1 $(FAKE_DEFS) $< -o $@
$(UNIT_TEST): | $(VENDOR_FAKE_LIBS)
$(BUILD)/obj/tests/unit/test_vendor_loader.o: EXTRA_CPPFLAGS += -DCNN_VENDOR_FAKES='"$(abspath $(VENDOR_FAKES))"'

-include $(shell find $(BUILD)/nvcc -name '*.d' 2>/dev/null)

TEST_BUILDS += $(CUDA_TEST)
TEST_RUNS += test-cuda cuda-nvcc-check cuda-link-check
