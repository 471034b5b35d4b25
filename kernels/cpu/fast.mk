# Fast CPU backend: oneDNN (Debian libdnnl-dev, OpenMP runtime) for convolution/matmul, OpenMP for the rest.
DEB_PACKAGES += libdnnl-dev
EXTRA_LDLIBS += -ldnnl
EXTRA_LDFLAGS += -fopenmp
$(BUILD)/obj/kernels/cpu/fast_cpu.o $(BUILD)/obj/kernels/cpu/batchnorm_fast.o $(BUILD)/obj/kernels/cpu/dnnl_ops.o \
  $(BUILD)/obj/kernels/cpu/graph_fast.o $(BUILD)/obj/kernels/cpu/batchnorm_blocked.o \
  $(BUILD)/obj/kernels/cpu/single_channel_conv.o $(BUILD)/obj/kernels/cpu/single_channel_rows.o \
  $(BUILD)/obj/kernels/cpu/small_channel_conv.o $(BUILD)/obj/kernels/cpu/gemm_conv.o \
  $(BUILD)/obj/kernels/cpu/winograd16_conv.o $(BUILD)/obj/kernels/cpu/cpu_pool.o: \
  EXTRA_CXXFLAGS += -fopenmp
# The activation kernels' loops (graph_fast.cpp) pick values with float comparisons (act_derivative's
# `x > alpha && x < beta ? 1 : 0`): under g++'s default -ftrapping-math it will not if-convert them, so they ran
# as scalar loops with a data-dependent branch (ReLU6's backward: 45% of a MobileNetV2 step, docs/perf.md).
# -fno-trapping-math only lets the compiler evaluate such comparisons unconditionally: same values (no IEEE
# exception is ever unmasked in cnntrain), not -ffast-math.
$(BUILD)/obj/kernels/cpu/graph_fast.o: EXTRA_CXXFLAGS += -fno-trapping-math
# make does not see flags change: the object also depends on this file, so an existing build picks them up.
$(BUILD)/obj/kernels/cpu/graph_fast.o: kernels/cpu/fast.mk
# Ranks waiting in MPI yield the core instead of spinning: with a loader thread per rank sharing the cores,
# a spinning rank starves its loader (make run on 2 cores: data wait 3-5% -> 0-1%, 25 s -> 21 s).
export OMPI_MCA_mpi_yield_when_idle ?= 1
