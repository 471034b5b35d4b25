# Mixed precision (docs/mixed_precision.md): the host-side 16-bit conversions split large arrays over OpenMP
# threads, like the fast CPU kernels.
$(BUILD)/obj/kernels/dtype.o: EXTRA_CXXFLAGS += -fopenmp
