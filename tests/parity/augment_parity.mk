# Augmentation against torchvision: rotation and colour jitter (tests/parity/augment_parity.py: augment_dump
# draws and applies them as the trainer does, the script applies torchvision's rotate/adjust_* with the same
# parameters), and resize and crop (tests/parity/resize_parity.py: resize_dump's boxes and outputs against
# torchvision's antialiased resized_crop / resize + center_crop). Part of `make test`; alone:
# make test-augment-parity.
DEB_PACKAGES += python3-torch python3-torchvision
AUGMENT_DUMP := $(BUILD)/tests/augment_dump
RESIZE_DUMP := $(BUILD)/tests/resize_dump

$(AUGMENT_DUMP) $(RESIZE_DUMP): $(BUILD)/tests/%: $(BUILD)/obj/tests/parity/%.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-augment-parity
test-augment-parity: $(AUGMENT_DUMP) $(RESIZE_DUMP)
	@set -o pipefail; $(AUGMENT_DUMP) | /usr/bin/python3 tests/parity/augment_parity.py
	@set -o pipefail; $(RESIZE_DUMP) | /usr/bin/python3 tests/parity/resize_parity.py

TEST_BUILDS += $(AUGMENT_DUMP) $(RESIZE_DUMP)
TEST_RUNS += test-augment-parity
