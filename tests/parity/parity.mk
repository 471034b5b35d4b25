# Numerical parity with PyTorch (tests/parity/torch_parity.py): one training batch of every model family of the
# zoo through cnntrain (parity_dump) and through the same network in PyTorch (float64), logits, loss, every
# parameter gradient and the batch-norm running statistics within 1e-4 of each tensor's scale. Part of
# `make test`; alone: make test-parity.
DEB_PACKAGES += python3-torch python3-torchvision
PARITY_DUMP := $(BUILD)/tests/parity_dump

$(PARITY_DUMP): $(BUILD)/obj/tests/parity/parity_dump.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# MODEL:HxWxC:BACKEND:SEED[:RESIDUAL_GAMMA]: the ImageNet ResNets at 64x64 (every layer runs; 224x224 adds only
# time); the reference kernels for the small models too. ResNet-50 starts its residual branches small
# (last batch-norm scale of each block in [0.1, 0.2]): at plain initialisation PyTorch's own float32 gradients
# are 20-30% from float64 (torch_parity.py checks the batch's conditioning and says so when it is not good).
PARITY_CASES := lenet5:28x28x1:cpu:7 fmnist_cnn:28x28x1:cpu:7 fmnist_resnet:28x28x1:cpu:7 resnet20:32x32x3:cpu:7 \
                resnet18:64x64x3:cpu:7 resnet50:64x64x3:cpu:1:0.1:0.2 lenet5:28x28x1:reference:7 \
                fmnist_cnn:28x28x1:reference:7 resnet20:32x32x3:reference:7

.PHONY: test-parity
test-parity: $(PARITY_DUMP)
	@set -e; dir=$$(mktemp -d /tmp/cnntrain-parity-XXXXXX); trap 'rm -rf "$$dir"' EXIT; \
	for c in $(PARITY_CASES); do \
	  IFS=: read -r model size backend seed glo ghi <<< "$$c"; IFS=x read -r h w ch <<< "$$size"; \
	  opt=(); [ -z "$$glo" ] || opt=(--residual-gamma "$$glo:$$ghi"); \
	  $(PARITY_DUMP) "$${opt[@]}" $$model $$h $$w $$ch 10 4 $$seed $$backend "$$dir/$$model-$$backend.h5" > /dev/null; \
	  printf '%s: ' "$$backend"; /usr/bin/python3 tests/parity/torch_parity.py "$$dir/$$model-$$backend.h5"; \
	done

TEST_BUILDS += $(PARITY_DUMP)
TEST_RUNS += test-parity
