# Fast CPU backend: oneDNN (Debian libdnnl-dev, OpenMP runtime) for convolution/matmul, OpenMP for the rest.
DEB_PACKAGES += libdnnl-dev
EXTRA_LDLIBS += -ldnnl
EXTRA_LDFLAGS += -fopenmp
$(BUILD)/obj/kernels/fast_cpu.o $(BUILD)/obj/kernels/dnnl_ops.o: EXTRA_CXXFLAGS += -fopenmp
