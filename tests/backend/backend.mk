# The backend sweep (tests/backend/sweep.h): every Backend op on every backend against the reference kernels,
# and the layers' finite-difference gradient checks on every backend. Part of `make test`; alone:
#   make test-backends
#   build/tests/backend_tests --gtest_filter='*conv2d_forward*emu*'
BACKEND_TEST      := $(BUILD)/tests/backend_tests
BACKEND_HEADER_CC := $(BUILD)/gen/tests/backend/backend_header.cpp
BACKEND_TEST_OBJS  = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/backend/*.cpp) $(TEST_COMMON_SRCS)) \
                     $(BUILD)/obj/gen/tests/backend/backend_header.o

# The sweep checks its cases against the Backend class as declared: the header's text is compiled in.
$(BACKEND_HEADER_CC): kernels/backend.h
	@mkdir -p $(@D)
	{ printf 'namespace cnn::sweep {\nextern const char kBackendHeader[];\nconst char kBackendHeader[] = R"cnnhdr('; \
	  cat $<; printf ')cnnhdr";\n}\n'; } > $@

$(BUILD)/obj/gen/tests/backend/backend_header.o: $(BACKEND_HEADER_CC)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# The GPU target of the shared backend list exists only in CUDA builds.
$(BUILD)/obj/tests/common/backend_targets.o: $(CUDA_STAMP)
ifeq ($(CUDA_ON),1)
$(BUILD)/obj/tests/common/backend_targets.o: EXTRA_CPPFLAGS += -DCNN_WITH_CUDA=1
endif

$(BACKEND_TEST): $(BACKEND_TEST_OBJS) $(LIB) $(CUDA_SIMT_LIB) | $(LAYERS_OK)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $^ -o $@ $(GTEST_LIBS) -lgtest_main $(LDLIBS)

.PHONY: test-backends
test-backends: $(BACKEND_TEST)
	$(BACKEND_TEST) --gtest_brief=1

gpu-test: $(BACKEND_TEST)
$(BACKEND_TEST): EXTRA_LDLIBS += $(CUDA_TEST_EXTRA_LIBS)

TEST_BUILDS += $(BACKEND_TEST)
TEST_RUNS += test-backends
