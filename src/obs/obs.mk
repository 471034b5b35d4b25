# Observability (src/obs): TensorBoard event records are protobuf messages compiled from src/obs/tfevent.proto
# (as io/lmdb.mk compiles io/datum.proto; -lprotobuf comes from there); the plot command runs
# src/obs/plot_run.py with Debian's matplotlib; the TensorBoard round-trip test reads event files with the real
# `tensorboard` package from PyPI in a virtual environment under $(BUILD) (make tb-venv).
DEB_PACKAGES += python3-matplotlib python3-venv

OBS_GEN := $(BUILD)/gen
EXTRA_CPPFLAGS += -I$(OBS_GEN)
OBS_PB_OBJ := $(BUILD)/obj/$(OBS_GEN)/src/obs/tfevent.pb.o
$(TRAIN_LIB): $(OBS_PB_OBJ)

$(OBS_GEN)/src/obs/tfevent.pb.cc $(OBS_GEN)/src/obs/tfevent.pb.h &: src/obs/tfevent.proto
	@mkdir -p $(OBS_GEN)
	protoc --proto_path=. --cpp_out=$(OBS_GEN) src/obs/tfevent.proto

# Only event_file.cpp includes the generated header; from a clean tree -MMD has not recorded that yet.
$(BUILD)/obj/src/obs/event_file.o: $(OBS_GEN)/src/obs/tfevent.pb.h

# The TensorBoard reader for tests (tests/e2e/test_tensorboard.sh makes it too): pip needs PyPI once, then
# the environment is reused; without PyPI it fails with pip's reason (no silent skip).
.PHONY: tb-venv
tb-venv:
	@bash tests/obs/tb_venv.sh $(BUILD)/tbvenv >/dev/null

# The plot script is compiled into cnntrain-data (fed to python's stdin), so the binary finds it wherever the
# build directory is.
PLOT_SCRIPT_OBJ := $(BUILD)/obj/$(OBS_GEN)/src/obs/plot_script.o
$(BUILD)/cnntrain-data: $(PLOT_SCRIPT_OBJ)
$(OBS_GEN)/src/obs/plot_script.cc: src/obs/plot_run.py
	@mkdir -p $(@D)
	@grep -q ')CNNPLOT' $< && { echo "$< must not contain )CNNPLOT" >&2; exit 1; } || true
	@{ echo '// Generated from src/obs/plot_run.py by src/obs/obs.mk.'; echo 'namespace cnn {'; \
	   echo 'extern const char kPlotScript[];'; echo 'const char kPlotScript[] = R"CNNPLOT('; cat $<; \
	   echo ')CNNPLOT";'; echo '}  // namespace cnn'; } > $@

# The unit test reads event files back through the generated header.
$(BUILD)/obj/tests/unit/test_observability.o: $(OBS_GEN)/src/obs/tfevent.pb.h

# Live monitoring's tests (tests/e2e/test_prometheus.sh, tests/unit/test_prometheus.cpp, test_nvml.cpp): a real
# Prometheus server and promtool from Debian's `prometheus` package (its daemon is not started: the test runs
# its own on loopback), and the fake NVML library, built for tests only and loaded through CNNTRAIN_TEST_NVML.
DEB_PACKAGES += prometheus
FAKE_NVML := $(BUILD)/tests/libfake-nvml.so
$(FAKE_NVML): tests/obs/fake_nvml.c
	@mkdir -p $(@D)
	gcc -std=c11 -shared -fPIC -O2 -Wall -Wextra $< -o $@
TEST_BUILDS += $(FAKE_NVML)
test-e2e: $(FAKE_NVML)
$(UNIT_TEST): | $(FAKE_NVML)
