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

# The TensorBoard reader for tests: pip needs PyPI once; afterwards the environment is reused. A failed
# install fails the target with the reason (no silent skip).
TB_VENV := $(BUILD)/tbvenv
.PHONY: tb-venv
tb-venv: $(TB_VENV)/.installed
$(TB_VENV)/.installed:
	@rm -rf $(TB_VENV)
	@/usr/bin/python3 -m venv $(TB_VENV) || { echo "tb-venv: python3 -m venv failed (install python3-venv: make deps)" >&2; exit 1; }
	@$(TB_VENV)/bin/pip install --quiet --disable-pip-version-check tensorboard >$(TB_VENV)/pip.log 2>&1 || \
	  { echo "tb-venv: 'pip install tensorboard' failed: PyPI is needed once to install the TensorBoard reader" \
	    "used by the tests ($(TB_VENV)/pip.log):" >&2; tail -5 $(TB_VENV)/pip.log >&2; rm -rf $(TB_VENV)/bin; exit 1; }
	@touch $@

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
