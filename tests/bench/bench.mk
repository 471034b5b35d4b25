# Benchmarks (`make bench`): not part of `make test`; figures go to docs/perf.md.
# The PyTorch peers of the training benchmark (tests/bench/torch_bench.py; ResNet-50 and MobileNetV2 from
# torchvision): PyTorch 2 from PyPI in build/pyvenv (`make pyvenv`, which the benchmarks run first) and
# Debian's 1.13 as a second column.
DEB_PACKAGES += python3-torch python3-torchvision
BENCH_DIR = $(BUILD)/bench
$(BENCH_DIR)/ckpt_bench: $(BUILD)/obj/tests/bench/ckpt_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

TRAIN_BENCH_OBJS = $(patsubst %.cpp,$(BUILD)/obj/%.o,tests/bench/train_bench.cpp tests/bench/peak.cpp \
                   tests/bench/op_profile.cpp tests/bench/torch_peer.cpp tests/bench/bn_bench.cpp \
                   tests/bench/conv_bench.cpp \
                   tests/bench/alloc_count.cpp)
$(BENCH_DIR)/train_bench: $(TRAIN_BENCH_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# $(LDLIBS) names the SIMT emulator's library (kernels/cuda/cuda.mk): built first, also by `make build/bench/X`
# on a tree where `make all` has not run.
$(BENCH_DIR)/ckpt_bench $(BENCH_DIR)/train_bench $(BENCH_DIR)/comm_bench $(BENCH_DIR)/recompute_bench: | $(CUDA_SIMT_LIB)

$(BENCH_DIR)/comm_bench: $(BUILD)/obj/tests/bench/comm_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The throughput cost of --train.recompute (docs/perf.md). RECOMPUTE_BENCH_ARGS e.g. "--pairs 5".
$(BENCH_DIR)/recompute_bench: $(BUILD)/obj/tests/bench/recompute_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)
RECOMPUTE_BENCH_ARGS ?=
bench-recompute: $(BENCH_DIR)/recompute_bench
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} $(BENCH_DIR)/recompute_bench $(RECOMPUTE_BENCH_ARGS)

BENCH_TARGETS += bench-train bench-ckpt bench-comm bench-precision bench-recompute
# make test builds the benchmarks (without running them), so an interface change cannot break `make bench` unseen.
TEST_BUILDS += $(BENCH_DIR)/train_bench $(BENCH_DIR)/ckpt_bench $(BENCH_DIR)/comm_bench $(BENCH_DIR)/recompute_bench
.PHONY: bench bench-ckpt bench-train bench-comm bench-precision bench-recompute
# Training-step throughput vs PyTorch, per-layer breakdown, conv GFLOP/s (figures in docs/perf.md).
# TRAIN_BENCH_ARGS e.g. "--models fmnist_cnn --threads 2 --reps 3". OpenMP threads (cnntrain's and PyTorch's)
# sleep instead of spinning at barriers unless OMP_WAIT_POLICY says otherwise: on a shared machine a spinning
# thread burns the time slice its descheduled team-mate needs (3-5x slower steps at 2 threads here).
TRAIN_BENCH_ARGS ?=
bench-train: $(BENCH_DIR)/train_bench pyvenv
	OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} $(BENCH_DIR)/train_bench --torch-python $(PYVENV)/bin/python \
	  $(TRAIN_BENCH_ARGS)
# Checkpoint throughput, ResNet-50-sized, 1/2/4 ranks (CKPT_BENCH_DIR should be on the file system of interest).
CKPT_BENCH_DIR ?= /tmp/cnntrain-ckpt-bench
bench-ckpt: $(BENCH_DIR)/ckpt_bench
	@rm -rf $(CKPT_BENCH_DIR) && mkdir -p $(CKPT_BENCH_DIR)
	@for np in 1 2 4; do $(MPIRUN) -np $$np $(BENCH_DIR)/ckpt_bench $(CKPT_BENCH_DIR) 5; rm -f $(CKPT_BENCH_DIR)/*; done
	@rm -rf $(CKPT_BENCH_DIR)
bench:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory $(BENCH_TARGETS)
# Exposed gradient communication at np 2 on cpu, overlap on vs off (docs/perf.md). COMM_BENCH_ARGS e.g.
# "--models resnet20 --reps 3".
COMM_BENCH_ARGS ?=
bench-comm: $(BENCH_DIR)/comm_bench
	$(MPIRUN) -np 2 $(BENCH_DIR)/comm_bench $(COMM_BENCH_ARGS)
# fp32 vs bf16 images/s with the real trainer, beside PyTorch fp32 and CPU autocast bf16 (docs/perf.md).
# PRECISION_BENCH_ARGS e.g. "--models resnet20 --reps 3 --threads 2".
PRECISION_BENCH_ARGS ?=
bench-precision: $(BINS) pyvenv
	BUILD=$(BUILD) TORCH_PYTHON=$(PYVENV)/bin/python bash tests/bench/precision_bench.sh $(PRECISION_BENCH_ARGS)
