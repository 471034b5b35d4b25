# Fast CPU backend: oneDNN (Debian libdnnl-dev, OpenMP runtime) for convolution/matmul, OpenMP for the rest.
DEB_PACKAGES += libdnnl-dev
EXTRA_LDLIBS += -ldnnl
EXTRA_LDFLAGS += -fopenmp
$(BUILD)/obj/kernels/cpu/fast_cpu.o $(BUILD)/obj/kernels/cpu/batchnorm_fast.o $(BUILD)/obj/kernels/cpu/dnnl_ops.o \
  $(BUILD)/obj/kernels/cpu/graph_fast.o: \
  EXTRA_CXXFLAGS += -fopenmp
# Ranks waiting in MPI yield the core instead of spinning: with a loader thread per rank sharing the cores,
# a spinning rank starves its loader (make run on 2 cores: data wait 3-5% -> 0-1%, 25 s -> 21 s).
export OMPI_MCA_mpi_yield_when_idle ?= 1
