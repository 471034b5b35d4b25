# Fine-tuning (src/train/init_from.h, src/train/freeze.h; docs/models.md "Fine-tuning"): torchvision state dicts
# as safetensors against PyTorch's logits through --init.from and `cnntrain-data predict` (in the PyPI venv of
# src/model/onnx.mk), and the Fashion-MNIST fine-tuning demonstration (tests/e2e/test_finetune.sh, run with
# the other e2e scripts).
INIT_FROM_RUN := $(BUILD)/tests/init_from_run
$(INIT_FROM_RUN): $(BUILD)/obj/tests/finetune/init_from_run.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-torchvision-parity
test-torchvision-parity: $(INIT_FROM_RUN) $(BUILD)/cnntrain-data pyvenv
	@dir=$$(mktemp -d /tmp/cnntrain-tv-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	$(PYVENV)/bin/python tests/finetune/torchvision_parity.py $(INIT_FROM_RUN) $(BUILD)/cnntrain-data "$$dir"

TEST_BUILDS += $(INIT_FROM_RUN)
TEST_RUNS += test-torchvision-parity

