# cnntrain build. `make` builds build/cnntrain and build/cnntrain-data; see README.md and docs/building.md.
# Variables: USE_CUDA=auto|0|1, ARCH (target ISA flags), OPT, NP (ranks for `make run`).
SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD    ?= build
USE_CUDA ?= auto
ARCH     ?= -march=x86-64-v3
OPT      ?= -O3
NP       ?= 2
# Debian packages (installed by `make deps` when missing; fragments add their own). Build and `make run`:
DEB_PACKAGES += g++ make pkg-config openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools \
                libboost-program-options-dev zlib1g-dev dataset-fashion-mnist
# `make test`: GoogleTest/GoogleMock, pgrep (procps) and Debian's python3 with h5py and numpy for the
# end-to-end scripts. The Slurm daemons of the Slurm tests come with `make test` itself (tests/slurm/slurm.mk).
DEB_PACKAGES += libgtest-dev libgmock-dev procps python3 python3-h5py python3-numpy

export OMPI_ALLOW_RUN_AS_ROOT ?= 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ?= 1

# Recursive (=) so that nothing runs pkg-config/mpicxx before `make deps` has installed them.
MPI_CFLAGS  = $(shell mpicxx --showme:compile 2>/dev/null)
MPI_LIBS    = $(shell mpicxx --showme:link 2>/dev/null)
HDF5_CFLAGS = $(shell pkg-config --cflags hdf5-openmpi 2>/dev/null)
HDF5_LIBS   = $(shell pkg-config --libs hdf5-openmpi 2>/dev/null)

CXX      := g++
CPPFLAGS  = -I. -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 $(MPI_CFLAGS) $(HDF5_CFLAGS) $(EXTRA_CPPFLAGS)
CXXFLAGS  = -std=c++17 $(OPT) $(ARCH) -g -pthread -Wall -Wextra -Wno-unused-parameter -MMD -MP $(EXTRA_CXXFLAGS)
LDFLAGS   = -pthread -Wl,-z,now $(EXTRA_LDFLAGS)
LDLIBS    = $(HDF5_LIBS) $(MPI_LIBS) -lboost_program_options -lz $(EXTRA_LDLIBS)

# One static library per layer; src/main*.cpp are the programs. From the bottom:
#   base     src/base: errors and messages; the SIMT emulator's libsimt.a sits beside it
#   kernels  the ops (kernels/: the Backend and Collectives interfaces, typed ops, CPU references) and the
#            backends that run them (kernels/cpu: oneDNN/OpenMP; kernels/cuda: custom CUDA kernels, runtime and
#            plugin; kernels/cuda/vendor: cuDNN, cuBLASLt and the algorithm choice), see docs/building.md
#   comm     src/comm: MPI and NCCL (the only mpi.h and nccl.h users besides the checkpoint's MPI-IO): the
#            process group, the collective watchdog and its heartbeat files, the Collectives implementations
#            (MPI on host memory, MPI on host copies of device memory, NCCL on device memory in
#            src/comm/nccl_collectives.cu, compiled twice like every .cu), device binding, and the emulated NCCL
#            (over MPI, ordered by the emulator's streams)
#   io       datasets
#   train    the rest of src/: model < checkpoint, obs < train (the model is handed its Collectives)
# $(LIB) lists them in link order. A lower layer that uses a higher one fails the build: by symbol
# (tests/layers/check_layers.sh) and by #include (tests/layers/check_includes.sh). Subsystems add their own rules in */*.mk fragments (included below) instead
# of editing this file; sources a fragment generates join a layer through EXTRA_IO_SRCS.
BASE_SRCS    = $(wildcard src/base/*.cpp)
COMM_SRCS    = $(wildcard src/comm/*.cpp)
KERNELS_SRCS = $(wildcard kernels/*.cpp kernels/cpu/*.cpp kernels/cuda/*.cpp kernels/cuda/vendor/*.cpp)
IO_SRCS      = $(wildcard io/*.cpp) $(EXTRA_IO_SRCS)
TRAIN_SRCS   = $(filter-out src/main%.cpp src/base/% src/comm/%,$(wildcard src/*/*.cpp))
objs_of      = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(patsubst %.cc,$(BUILD)/obj/%.o,$(1)))
BASE_LIB     = $(BUILD)/libcnnbase.a
COMM_LIB     = $(BUILD)/libcnncomm.a
KERNELS_LIB  = $(BUILD)/libcnnkernels.a
IO_LIB       = $(BUILD)/libcnnio.a
TRAIN_LIB    = $(BUILD)/libcnntrain.a
LIB          = $(TRAIN_LIB) $(IO_LIB) $(COMM_LIB) $(KERNELS_LIB) $(BASE_LIB)
LAYERS_OK    = $(BUILD)/layers.ok
BINS         = $(BUILD)/cnntrain $(BUILD)/cnntrain-data

TEST_COMMON_SRCS = $(wildcard tests/common/*.cpp)
UNIT_SRCS = $(wildcard tests/unit/*.cpp) $(TEST_COMMON_SRCS)
MPI_SRCS  = $(wildcard tests/mpi/*.cpp) $(TEST_COMMON_SRCS)
UNIT_TEST = $(BUILD)/tests/unit_tests
MPI_TEST  = $(BUILD)/tests/mpi_tests
GTEST_LIBS = -lgtest -lgmock

MPIRUN   ?= mpirun --oversubscribe --mca btl self,vader
# Fragments append test programs to TEST_BUILDS and phony targets that run them to TEST_RUNS.
TEST_BUILDS ?=
TEST_RUNS ?=

include $(sort $(wildcard */*.mk */*/*.mk))

# The version string (`cnntrain --version`, the log, metrics.jsonl's start event, checkpoints, exported ONNX files)
# names the commit the binary was built from: $(BUILD)/git_version holds `git describe` and is rewritten, rebuilding
# config.o, only when that changes (a new commit, or the tree turning dirty or clean). tests/e2e/test_version.sh
# checks it.
GIT_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/obj/src/train/config.o: EXTRA_CPPFLAGS += -DCNN_GIT_VERSION='"$(GIT_VERSION)"'
$(BUILD)/obj/src/train/config.o: $(BUILD)/git_version
.PHONY: git-version-stamp
$(BUILD)/git_version: git-version-stamp
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(GIT_VERSION)' ] || echo '$(GIT_VERSION)' > $@

.PHONY: all deps data run test test-unit test-mpi test-mpi-np2 test-mpi-np4 test-e2e clean print-%
all: $(BINS)

# Installs only what is missing; quiet and fast (one dpkg-query) when everything is there.
deps:
	@installed=" $$(dpkg-query -W -f='$${db:Status-Abbrev} $${Package}\n' $(sort $(DEB_PACKAGES)) 2>/dev/null | \
	  awk '$$1 == "ii" { printf "%s ", $$2 }')"; \
	missing=""; for p in $(sort $(DEB_PACKAGES)); do \
	  case "$$installed" in *" $$p "*) ;; *) missing="$$missing $$p" ;; esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
	  { echo "make deps: apt-get failed; install these packages by hand:$$missing" >&2; exit 1; }; \
	fi

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BASE_LIB): $(call objs_of,$(BASE_SRCS))
$(COMM_LIB): $(call objs_of,$(COMM_SRCS))
$(KERNELS_LIB): $(call objs_of,$(KERNELS_SRCS))
$(IO_LIB): $(call objs_of,$(IO_SRCS))
$(TRAIN_LIB): $(call objs_of,$(TRAIN_SRCS))
$(LIB):
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# Layer order, checked whenever a library changes; the programs wait for it (order-only: not linked).
LAYER_GROUPS = "base:$(BASE_LIB) $(SIMT_LIB)" "kernels:$(KERNELS_LIB)" "comm:$(COMM_LIB)" "io:$(IO_LIB)" \
               "train:$(TRAIN_LIB)"
.PHONY: check-layers
check-layers: $(LAYERS_OK)
$(LAYERS_OK): $(LIB) $(SIMT_LIB) tests/layers/check_layers.sh tests/layers/check_includes.sh
	bash tests/layers/check_layers.sh $(LAYER_GROUPS)
	bash tests/layers/check_includes.sh
	@touch $@
$(BINS) $(UNIT_TEST) $(MPI_TEST): | $(LAYERS_OK)

$(BUILD)/cnntrain: $(BUILD)/obj/src/main.o $(LIB)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/cnntrain-data: $(BUILD)/obj/src/main_data.o $(LIB)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(UNIT_TEST): $(patsubst %.cpp,$(BUILD)/obj/%.o,$(UNIT_SRCS)) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(GTEST_LIBS) -lgtest_main $(LDLIBS)

$(MPI_TEST): $(patsubst %.cpp,$(BUILD)/obj/%.o,$(MPI_SRCS)) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(GTEST_LIBS) $(LDLIBS)

# Fashion-MNIST from Debian's dataset-fashion-mnist, converted to the HDF5 schema of docs/data.md by
# data/prepare_fashion_mnist.sh (data/README.md).
FMNIST_IDX ?= /usr/share/datasets/fashion-mnist
data: data/fashion_mnist/train.h5 data/fashion_mnist/test.h5
data/fashion_mnist/train.h5 data/fashion_mnist/test.h5 &: $(BUILD)/cnntrain-data data/prepare_fashion_mnist.sh \
                                                         data/lib.bash
	BUILD=$(BUILD) bash data/prepare_fashion_mnist.sh $(FMNIST_IDX) data/fashion_mnist

# Install what is missing, build, prepare Fashion-MNIST and train on CPU with NP ranks.
RUN_ARGS ?=
run:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory data
	$(MPIRUN) -np $(NP) $(BUILD)/cnntrain --config jobs/fashion_mnist.ini $(RUN_ARGS)

test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory $(BINS) $(UNIT_TEST) $(MPI_TEST) $(TEST_BUILDS)
	@$(MAKE) --no-print-directory data
	+@bash tests/run_parts.sh $(BUILD)/test-results $(TEST_PARTS)

# The parts of `make test`, each "name=command", run and counted by tests/run_parts.sh (docs/testing.md).
SUBMAKE = $(MAKE) --no-print-directory
TEST_PARTS = 'unit=$(SUBMAKE) test-unit' 'mpi-np2=$(SUBMAKE) test-mpi-np2' 'mpi-np4=$(SUBMAKE) test-mpi-np4' \
             $(foreach t,$(E2E_TESTS),'$(notdir $(basename $(t)))=BUILD=$(BUILD) bash $(t)') \
             $(foreach t,$(TEST_RUNS),'$(t)=$(SUBMAKE) $(t)')

test-unit: $(UNIT_TEST) $(BINS)
	$(UNIT_TEST) --gtest_brief=1

test-mpi: $(MPI_TEST)
	@$(SUBMAKE) test-mpi-np2 && $(SUBMAKE) test-mpi-np4
test-mpi-np2 test-mpi-np4: test-mpi-np%: $(MPI_TEST)
	$(MPIRUN) -np $* $(MPI_TEST) --gtest_brief=1

.PHONY: test-run-parts
test-run-parts:
	bash tests/test_run_parts.sh
TEST_RUNS += test-run-parts

E2E_TESTS = $(wildcard tests/e2e/test_*.sh)
# test_bench_args.sh runs the benchmarks (make test builds them with TEST_BUILDS).
test-e2e: $(BINS) data $(BENCH_DIR)/train_bench $(BENCH_DIR)/comm_bench $(BENCH_DIR)/recompute_bench
	@set -e; for t in $(E2E_TESTS); do echo "== $$t"; BUILD=$(BUILD) bash $$t; done

# --one-file-system: never descend into a mount (tests/fresh/root.sh mounts /proc, /sys and /dev below $(BUILD)).
clean:
	rm -rf --one-file-system $(BUILD)

print-%:
	@echo '$($*)'

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
