# The layer checks (tests/layers/check_layers.sh by symbol, check_includes.sh by #include and for mpi.h and
# nccl.h) on the real tree run with every build ($(LAYERS_OK)); `make test-layers` also shows that they catch
# a dependency in the wrong direction: a copy of the base library with one object calling into the comm
# layer must fail the first, planted includes (a model file including src/comm, <nccl.h> in kernels, ...)
# the second.
LAYERS_PLANTED := $(BUILD)/tests/layers/base_with_violation.a

$(LAYERS_PLANTED): $(BASE_LIB) $(BUILD)/obj/tests/layers/planted_violation.o
	@mkdir -p $(@D)
	@rm -f $@
	cp $(BASE_LIB) $@
	ar rs $@ $(BUILD)/obj/tests/layers/planted_violation.o

.PHONY: test-layers
test-layers: $(LAYERS_OK) $(LAYERS_PLANTED)
	@if bash tests/layers/check_layers.sh "base:$(LAYERS_PLANTED) $(SIMT_LIB)" "kernels:$(KERNELS_LIB)" \
	    "comm:$(COMM_LIB)" "io:$(IO_LIB)" "train:$(TRAIN_LIB)" 2>$(BUILD)/tests/layers/planted.log; then \
	  echo "test-layers: the planted base -> comm dependency was not detected" >&2; exit 1; fi; \
	grep -q 'world_rank' $(BUILD)/tests/layers/planted.log || { cat $(BUILD)/tests/layers/planted.log; exit 1; }; \
	echo "test-layers: layer order holds; a planted base -> comm call is rejected"
	@bash tests/layers/check_includes.sh --self-test

TEST_BUILDS += $(LAYERS_PLANTED)
TEST_RUNS += test-layers

# Size limits (tests/layers/check_sizes.sh): every tracked source within 600 lines and 80 a function body,
# less the excuses in tests/layers/size_exceptions.txt, and the checker catching planted violations.
.PHONY: test-sizes
test-sizes:
	@bash tests/layers/check_sizes.sh --self-test
	@bash tests/layers/check_sizes.sh
TEST_RUNS += test-sizes
