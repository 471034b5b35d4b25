# The Datum/image decoder fuzz harness, built with AddressSanitizer + UBSan as its own binary. Its own
# sources are compiled instrumented; the rest (error, comm) comes uninstrumented from libcnntrain.a.
FUZZ_DATUM      := $(BUILD)/tests/fuzz_datum
FUZZ_DATUM_SRCS := tests/lmdb/fuzz_datum.cpp io/lmdb_datum.cpp io/lmdb_dataset.cpp io/lmdb_env.cpp \
                   io/lmdb_meta.cpp io/image_codec.cpp
FUZZ_DATUM_OBJS := $(patsubst %.cpp,$(BUILD)/asan/%.o,$(FUZZ_DATUM_SRCS)) $(BUILD)/asan/gen/datum.pb.o
FUZZ_SANITIZE   := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CASES      ?= 20000

TEST_BUILDS += $(FUZZ_DATUM)
TEST_RUNS   += test-lmdb-fuzz

$(BUILD)/asan/%.o: %.cpp | $(LMDB_GEN)/io/datum.pb.h
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) -std=c++17 -O1 -g -pthread $(FUZZ_SANITIZE) -MMD -MP -c $< -o $@

$(BUILD)/asan/gen/datum.pb.o: $(LMDB_GEN)/io/datum.pb.cc
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) -std=c++17 -O1 -g -pthread $(FUZZ_SANITIZE) -c $< -o $@

$(FUZZ_DATUM): $(FUZZ_DATUM_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $(FUZZ_SANITIZE) $^ -o $@ $(LDLIBS)

.PHONY: test-lmdb-fuzz
# Skipped-record warnings are expected by the thousand; everything else (sanitizer reports) is shown.
test-lmdb-fuzz: $(FUZZ_DATUM)
	@set -o pipefail; $(FUZZ_DATUM) $(FUZZ_CASES) 1 2>&1 | grep -v '^cnntrain: warning: LMDB'

-include $(shell find $(BUILD)/asan -name '*.d' 2>/dev/null)

# Fashion-MNIST trained from LMDB must give exactly the HDF5 run's loss sequence.
TEST_RUNS   += test-lmdb-e2e

.PHONY: test-lmdb-e2e
test-lmdb-e2e: $(BINS) data
	BUILD=$(BUILD) FMNIST_IDX=$(FMNIST_IDX) bash tests/lmdb/e2e_same_loss.sh
