# Benchmarks (`make bench`): not part of `make test`; figures go to docs/perf.md.
BENCH_DIR = $(BUILD)/bench
$(BENCH_DIR)/ckpt_bench: $(BUILD)/obj/tests/bench/ckpt_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

BENCH_TARGETS += bench-ckpt
.PHONY: bench bench-ckpt
# Checkpoint throughput, ResNet-50-sized, 1/2/4 ranks (CKPT_BENCH_DIR should be on the file system of interest).
CKPT_BENCH_DIR ?= /tmp/cnntrain-ckpt-bench
bench-ckpt: $(BENCH_DIR)/ckpt_bench
	@rm -rf $(CKPT_BENCH_DIR) && mkdir -p $(CKPT_BENCH_DIR)
	@for np in 1 2 4; do $(MPIRUN) -np $$np $(BENCH_DIR)/ckpt_bench $(CKPT_BENCH_DIR) 5; rm -f $(CKPT_BENCH_DIR)/*; done
	@rm -rf $(CKPT_BENCH_DIR)
bench: $(BENCH_TARGETS)
