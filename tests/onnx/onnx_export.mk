# ONNX export (cnntrain-data export --format onnx, docs/models.md "Exporting to ONNX"): zoo models and an
# imported graph, trained a few steps, exported, checked by onnx.checker and run by ONNX Runtime against
# cnntrain's own logits of the checkpoint (tests/onnx/ckpt_logits), in the PyPI venv (make pyvenv).
CKPT_LOGITS := $(BUILD)/tests/ckpt_logits
$(CKPT_LOGITS): $(BUILD)/obj/tests/onnx/ckpt_logits.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-onnx-export
test-onnx-export: $(CKPT_LOGITS) $(BINS) pyvenv data
	@dir=$$(mktemp -d /tmp/cnntrain-onnx-export-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	$(PYVENV)/bin/python tests/onnx/export_parity.py $(BUILD) "$$dir"

TEST_BUILDS += $(CKPT_LOGITS)
TEST_RUNS += test-onnx-export
