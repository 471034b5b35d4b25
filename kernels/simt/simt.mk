# SIMT emulator (kernels/simt/): library, tests, benchmark, and the nvcc build check of a sample kernel.
#   make test-simt         build and run build/tests/simt_tests (also part of `make test`)
#   make simt-nvcc-check   compile tests/simt/{test,wmma,grid}_kernels.cu with nvcc for sm_80 and sm_90 (if nvcc exists)
#   make test-simt-asan    the same tests built with AddressSanitizer in $(BUILD)/asan (also part of `make
#                          test`): out-of-bounds accesses to device memory in kernels are reported by line
#   make simt-bench        fiber switch rate, asm context switch vs ucontext
# Code that runs .cu files under the emulator compiles them with the rule for $(BUILD)/obj/%.emu.o and
# links $(SIMT_LIB).

SIMT_SRCS  := $(wildcard kernels/simt/*.cpp)
SIMT_OBJS  := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(SIMT_SRCS))
SIMT_LIB   := $(BUILD)/libsimt.a
SIMT_TEST  := $(BUILD)/tests/simt_tests
SIMT_BENCH := $(BUILD)/tests/simt_bench
SIMT_TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/simt/*_test.cpp)) \
                  $(patsubst %.cu,$(BUILD)/obj/%.emu.o,$(wildcard tests/simt/*.cu))

NVCC ?= nvcc
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90

# A .cu file built by the host compiler: without __CUDACC__, kernels/simt/cuda_compat.h selects the emulator.
$(BUILD)/obj/%.emu.o: %.cu
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -x c++ -c $< -o $@

$(SIMT_LIB): $(SIMT_OBJS)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

$(SIMT_TEST): $(SIMT_TEST_OBJS) $(SIMT_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ -lgtest -lgtest_main

$(SIMT_BENCH): $(BUILD)/obj/tests/simt/simt_bench.o $(SIMT_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@

.PHONY: test-simt test-simt-asan simt-bench simt-nvcc-check
test-simt: $(SIMT_TEST)
	$(SIMT_TEST) --gtest_brief=1

test-simt-asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT=-O1 EXTRA_CXXFLAGS=-fsanitize=address \
	  EXTRA_LDFLAGS=-fsanitize=address test-simt

simt-bench: $(SIMT_BENCH)
	$(SIMT_BENCH)

# Compile only (nothing can run without a GPU); the ptxas report (registers, spills) is kept next to each object.
SIMT_NVCC_SAMPLES := tests/simt/test_kernels.cu tests/simt/wmma_kernels.cu tests/simt/grid_kernels.cu
simt-nvcc-check:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "simt-nvcc-check: $(NVCC) not found, skipped"; \
	  echo "$(NVCC) not found" > "$${CNNTRAIN_PART_SKIP_FILE:-/dev/null}"; exit 0; fi; \
	mkdir -p $(BUILD)/nvcc/tests/simt && \
	for f in $(SIMT_NVCC_SAMPLES); do \
	  log=$(BUILD)/nvcc/$${f%.cu}.ptxas.txt; \
	  $(NVCC) -std=c++17 -I. $(NVCC_GENCODE) -Xptxas -v -c $$f -o $(BUILD)/nvcc/$${f%.cu}.o 2> $$log || \
	    { cat $$log; exit 1; }; \
	  echo "simt-nvcc-check: $$f builds for sm_80 and sm_90;" \
	    "$$(grep -c 'bytes spill stores' $$log) ptxas reports," \
	    "$$(grep -E '[1-9][0-9]* bytes spill (stores|loads)' $$log | wc -l) with spills"; \
	done

TEST_BUILDS += $(SIMT_TEST)
TEST_RUNS += test-simt test-simt-asan simt-nvcc-check
