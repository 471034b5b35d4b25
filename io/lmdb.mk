# LMDB datasets: Caffe Datum records parsed with protobuf; JPEG/PNG through libjpeg-turbo/libpng.
DEB_PACKAGES += liblmdb-dev libprotobuf-dev protobuf-compiler libjpeg62-turbo-dev libpng-dev

LMDB_GEN := $(BUILD)/gen
EXTRA_IO_SRCS += $(LMDB_GEN)/io/datum.pb.cc
EXTRA_CPPFLAGS += -I$(LMDB_GEN)
EXTRA_LDLIBS += -llmdb -lprotobuf -ljpeg -lpng

# protoc runs at build time so the generated code always matches the installed libprotobuf.
$(LMDB_GEN)/io/datum.pb.cc $(LMDB_GEN)/io/datum.pb.h &: io/datum.proto
	@mkdir -p $(LMDB_GEN)
	protoc --proto_path=. --cpp_out=$(LMDB_GEN) io/datum.proto

# Only lmdb_datum.cpp includes the generated header; from a clean tree -MMD has not recorded that yet.
$(BUILD)/obj/io/lmdb_datum.o: $(LMDB_GEN)/io/datum.pb.h

# Read-throughput benchmark (part of `make bench`, not of `make test`); figures in docs/perf.md.
READ_BENCH := $(BUILD)/bench/read_bench
BENCH_TARGETS += bench-read

$(READ_BENCH): $(BUILD)/obj/tests/bench/read_bench.o $(LIB)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: bench-read
bench-read: $(READ_BENCH)
	$(READ_BENCH) $${TMPDIR:-/tmp}
