# ONNX files (src/model/onnx, docs/models.md "Bring your own network"): parsed with the ONNX project's protobuf
# messages and written after its checker, both from Debian's libonnx-dev. Tests: the unit tests (OnnxIo.*,
# OnnxFiles.*), files from PyTorch's two exporters compared with the onnx package (test-onnx-torch, in the PyPI
# venv below), the loader fuzzer (test-onnx-fuzz) and cnntrain-data onnx-info (tests/e2e/test_onnx_info.sh).
DEB_PACKAGES += libonnx-dev python3-venv
TRAIN_SRCS += $(wildcard src/model/onnx/*.cpp)
EXTRA_LDLIBS += -lonnx -lonnx_proto

# PyTorch 2 (the default dynamo exporter and the TorchScript one), torchvision, onnx, onnxruntime and onnxscript
# from PyPI, once, into build/pyvenv; the ONNX tests and the PyTorch benchmarks share it.
PYVENV := $(BUILD)/pyvenv
.PHONY: pyvenv
pyvenv:
	@bash tests/onnx/py_venv.sh $(PYVENV) >/dev/null

ONNX_TOOL := $(BUILD)/tests/onnx_tool
$(ONNX_TOOL): $(BUILD)/obj/tests/onnx/onnx_tool.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-onnx-torch
test-onnx-torch: $(ONNX_TOOL) pyvenv
	@dir=$$(mktemp -d /tmp/cnntrain-onnx-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	$(PYVENV)/bin/python tests/onnx/torch_files.py $(ONNX_TOOL) "$$dir"

# The loader under AddressSanitizer + UBSan, fed mutated models (tests/onnx/fuzz_onnx.cpp).
FUZZ_ONNX      := $(BUILD)/tests/fuzz_onnx
# The file layer only (not the graph import beside it, which needs the model layer).
ONNX_FILE_SRCS := $(addprefix src/model/onnx/,onnx_model.cpp onnx_read.cpp onnx_tensor.cpp onnx_write.cpp)
FUZZ_ONNX_SRCS := tests/onnx/fuzz_onnx.cpp $(ONNX_FILE_SRCS)
FUZZ_ONNX_CASES ?= 20000
$(FUZZ_ONNX): $(patsubst %.cpp,$(BUILD)/asan/%.o,$(FUZZ_ONNX_SRCS)) $(BASE_LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $(FUZZ_SANITIZE) $^ -o $@ $(LDLIBS)

.PHONY: test-onnx-fuzz
test-onnx-fuzz: $(FUZZ_ONNX)
	$(FUZZ_ONNX) $(FUZZ_ONNX_CASES) 1

# The same harness under libFuzzer for open-ended runs (not part of `make test`; needs clang):
#   make fuzz-onnx-libfuzzer FUZZ_ARGS="-max_total_time=600"
LIBFUZZER_ONNX := $(BUILD)/fuzz/fuzz_onnx_libfuzzer
FUZZ_ARGS ?= -runs=100000
$(LIBFUZZER_ONNX): $(FUZZ_ONNX_SRCS) $(BASE_SRCS)
	@mkdir -p $(@D)
	clang++ -std=c++17 -O1 -g -I. -DCNN_LIBFUZZER -fsanitize=fuzzer,address,undefined $^ -o $@ \
	  -lonnx -lonnx_proto -lprotobuf -pthread

.PHONY: fuzz-onnx-libfuzzer
fuzz-onnx-libfuzzer: $(LIBFUZZER_ONNX) $(FUZZ_ONNX)
	@mkdir -p $(BUILD)/fuzz/onnx_corpus
	$(FUZZ_ONNX) seeds $(BUILD)/fuzz/onnx_corpus
	$(LIBFUZZER_ONNX) $(FUZZ_ARGS) $(BUILD)/fuzz/onnx_corpus

TEST_BUILDS += $(ONNX_TOOL) $(FUZZ_ONNX)
TEST_RUNS += test-onnx-torch test-onnx-fuzz

# An imported model run as training runs it (tests/onnx/onnx_run), against PyTorch: evaluation logits and one
# SGD step (tests/onnx/import_parity.py).
ONNX_RUN := $(BUILD)/tests/onnx_run
$(ONNX_RUN): $(BUILD)/obj/tests/onnx/onnx_run.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-onnx-import
test-onnx-import: $(ONNX_RUN) pyvenv
	@dir=$$(mktemp -d /tmp/cnntrain-onnx-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	$(PYVENV)/bin/python tests/onnx/import_parity.py $(ONNX_RUN) "$$dir"

TEST_BUILDS += $(ONNX_RUN)
TEST_RUNS += test-onnx-import
