# Non-finite checks: the fast CPU variant in kernels/nonfinite_cpu.cpp is OpenMP (the link flag comes from
# kernels/cpu/fast.mk).
$(BUILD)/obj/kernels/nonfinite_cpu.o: EXTRA_CXXFLAGS += -fopenmp
