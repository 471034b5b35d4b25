# The self-contained GPU bundle (docs/gpu.md).
#   make gpu-bundle        build/cnntrain-gpu.tar.gz (<= 60 MiB): unpack on a GPU machine, run
#                          cnntrain-gpu/run-gpu-checks.sh; needs the CUDA build (nvcc) and `make data`
#   make test-gpu-bundle   the no-GPU proof (root; on demand, a few minutes): in a minimal Debian 12 root
#                          (tests/fresh/root.sh) with none of the project's packages, the unpacked bundle trains
#                          --device cpu, also through its own mpirun -np 2, and run-gpu-checks.sh stops with
#                          "no GPU" and a non-zero exit
GPU_BUNDLE := $(BUILD)/cnntrain-gpu.tar.gz

.PHONY: gpu-bundle test-gpu-bundle
gpu-bundle: $(GPU_BUNDLE)
$(GPU_BUNDLE): $(BINS) $(CUDA_TEST) $(BACKEND_TEST) $(CUDA_PLUGIN) $(wildcard tests/gpu_bundle/*) tests/bench/torch_resnet50.py \
               | data
	@[ "$(CUDA_ON)" = 1 ] || { echo "gpu-bundle: needs the CUDA build (nvcc on PATH, USE_CUDA=auto|1)" >&2; exit 1; }
	bash tests/gpu_bundle/make_bundle.sh $(BUILD) $@

test-gpu-bundle: $(GPU_BUNDLE)
	@$(MAKE) --no-print-directory deps DEB_PACKAGES=debootstrap
	FRESH_DIR=$(BUILD)/fresh bash tests/gpu_bundle/test_bundle.sh $(GPU_BUNDLE)
