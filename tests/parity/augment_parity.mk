# Rotation and colour jitter against torchvision (tests/parity/augment_parity.py): augment_dump draws and
# applies them as the trainer does, the script applies torchvision's rotate/adjust_* with the same parameters.
# Part of `make test`; alone: make test-augment-parity.
DEB_PACKAGES += python3-torch python3-torchvision
AUGMENT_DUMP := $(BUILD)/tests/augment_dump

$(AUGMENT_DUMP): $(BUILD)/obj/tests/parity/augment_dump.o $(LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: test-augment-parity
test-augment-parity: $(AUGMENT_DUMP)
	@set -o pipefail; $(AUGMENT_DUMP) | /usr/bin/python3 tests/parity/augment_parity.py

TEST_BUILDS += $(AUGMENT_DUMP)
TEST_RUNS += test-augment-parity
