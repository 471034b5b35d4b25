# CUDA backend (kernels/*.cu). Always built against the SIMT emulator for --device emu (g++ only); with
# USE_CUDA on (auto: when nvcc is found) also by nvcc (sm_80 and sm_90 code plus compute_90 PTX, which the
# driver compiles for newer GPUs) for --device cuda, together with the cuDNN/cuBLASLt paths
# (kernels/cudnn_*.cu, kernels/cublaslt_*.cu: nvcc only), into the plugin $(BUILD)/libcnntrain-cuda.so. The
# plugin links the CUDA runtime statically and cuDNN, cuBLASLt and NCCL dynamically (never libcuda); cnntrain
# dlopens it for --device cuda only, so the trainer starts, and runs --device cpu, without any CUDA library.
# The plugin takes the base and comm layers' symbols (errors, MPI bootstrap, watchdog) from the executable.
#   make test-cuda        emu-vs-reference training (the kernels themselves: the backend sweep, tests/backend/)
#   make cuda-nvcc-check  nvcc build of every kernels/*.cu; ptxas reports in $(BUILD)/nvcc/kernels/*.ptxas.txt
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

CUDA_VENDOR_SRCS := $(wildcard kernels/cudnn_*.cu kernels/cublaslt_*.cu)
CUDA_SRCS     := $(filter-out $(CUDA_VENDOR_SRCS),$(wildcard kernels/*.cu))
CUDA_EMU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.emu.o,$(CUDA_SRCS))
CUDA_GPU_OBJS := $(patsubst %.cu,$(BUILD)/nvcc/%.o,$(CUDA_SRCS) $(CUDA_VENDOR_SRCS))
# Host code the plugin carries itself (position-independent; base-layer symbols come from the executable).
CUDA_PIC_OBJS := $(BUILD)/pic/kernels/algo_select.o
CUDA_GPU_LIB  := $(BUILD)/libcnngpu.a
CUDA_PLUGIN   := $(BUILD)/libcnntrain-cuda.so
CUDA_LINK     := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublasLt -lnccl -lcudart_static -ldl -lrt
CUDA_SIMT_LIB := $(BUILD)/libsimt.a   # = $(SIMT_LIB) of kernels/simt/simt.mk, which is included after this file
CUDA_TEST     := $(BUILD)/tests/cuda_tests
CUDA_TEST_OBJS = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/cuda/*.cpp) $(TEST_COMMON_SRCS))

# The emulated backend is part of every build; everything linking libcnntrain also links the emulator.
$(KERNELS_LIB): $(CUDA_EMU_OBJS)
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

.PHONY: test-cuda test-cuda-asan cuda-nvcc-check gpu-test
test-cuda: $(CUDA_TEST)
	$(CUDA_TEST) --gtest_brief=1
	@# Without a GPU, CNN_REQUIRE_GPU=1 must turn the GPU tests' skips into failures.
	@if ! nvidia-smi -L >/dev/null 2>&1; then \
	  if CNN_REQUIRE_GPU=1 $(CUDA_TEST) --gtest_filter='Targets/Training.*/cuda' >/dev/null 2>&1; then \
	    echo "test-cuda: CNN_REQUIRE_GPU=1 passed without a GPU" >&2; exit 1; fi; \
	  echo "test-cuda: CNN_REQUIRE_GPU=1 fails the GPU tests on this GPU-less machine, as it must"; fi

# The same tests built with AddressSanitizer in $(BUILD)/asan (the arena then gives every tensor its own
# allocation): kernels reading or writing past a tensor are reported by source line. On demand only; it
# rebuilds the whole library.
test-cuda-asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT=-O1 USE_CUDA=0 EXTRA_CXXFLAGS=-fsanitize=address \
	  EXTRA_LDFLAGS=-fsanitize=address test-cuda test-backends

# Every Backend op and the training test on the real GPU ($(BACKEND_TEST): tests/backend/backend.mk, which
# adds it to the prerequisites).
gpu-test: $(CUDA_TEST)
	CNN_REQUIRE_GPU=1 $(BACKEND_TEST) --gtest_filter='*__cuda*:*/cuda*'
	CNN_REQUIRE_GPU=1 $(CUDA_TEST) --gtest_filter='*/cuda*:VendorSpeed.*:NcclOneRank.*'

# Compiles every kernels/*.cu with nvcc (whether or not USE_CUDA links them in) and summarises the ptxas
# reports: a kernel that spills registers fails the check.
cuda-nvcc-check:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "cuda-nvcc-check: $(NVCC) not found, skipped"; \
	  echo "$(NVCC) not found" > "$${CNN_PART_SKIP_FILE:-/dev/null}"; exit 0; fi; \
	$(MAKE) --no-print-directory $(CUDA_GPU_OBJS) >/dev/null || exit 1; \
	logs="$(CUDA_GPU_OBJS:.o=.ptxas.txt)"; \
	spills=$$(cat $$logs | grep -E '[1-9][0-9]* bytes spill (stores|loads)' | wc -l); \
	echo "cuda-nvcc-check: $(words $(CUDA_SRCS) $(CUDA_VENDOR_SRCS)) files build for sm_80 and sm_90 (+ compute_90 PTX);" \
	  "$$(cat $$logs | grep -c 'bytes spill stores') kernel reports, $$spills with spills"; \
	[ "$$spills" = 0 ] || { grep -B2 -E '[1-9][0-9]* bytes spill' $$logs; exit 1; }

-include $(shell find $(BUILD)/nvcc -name '*.d' 2>/dev/null)

TEST_BUILDS += $(CUDA_TEST)
TEST_RUNS += test-cuda cuda-nvcc-check
