# The self-contained GPU bundle (docs/gpu.md).
#   make gpu-bundle        build/cnntrain-gpu.tar.gz (<= 60 MiB): unpack on a GPU machine, run
#                          cnntrain-gpu/run-gpu-checks.sh; needs the CUDA build (nvcc), `make data` and, once,
#                          PyPI (compute-sanitizer)
#   make test-gpu-bundle   the no-GPU proof (root; on demand, a few minutes): in a minimal Debian 11 root
#                          (glibc 2.31; tests/fresh/root.sh) with none of the project's packages, the unpacked
#                          bundle trains --device cpu, also through its own mpirun -np 2, and run-gpu-checks.sh
#                          stops with "no GPU", stops on an old driver, and runs every check under a stand-in
#                          nvidia-smi (tests/gpu_bundle/test_bundle.sh)
#   make test-gpu-checks   part of `make test` (about a minute): run-gpu-checks.sh over stand-in programs, and
#                          with the CUDA build over the real bundle unpacked in a scratch directory, under a
#                          stand-in nvidia-smi (tests/gpu_bundle/test_checks.sh)
GPU_BUNDLE := $(BUILD)/cnntrain-gpu.tar.gz
# NVIDIA's compute-sanitizer in the bundle, from PyPI once (0: without it; its checks then skip)
BUNDLE_SANITIZER ?= 1

.PHONY: gpu-bundle test-gpu-bundle test-gpu-checks
gpu-bundle: $(GPU_BUNDLE)
$(GPU_BUNDLE): $(BINS) $(CUDA_TEST) $(BACKEND_TEST) $(CUDA_PLUGIN) $(wildcard tests/gpu_bundle/*) tests/bench/torch_resnet50.py \
               | data
	@[ "$(CUDA_ON)" = 1 ] || { echo "gpu-bundle: needs the CUDA build (nvcc on PATH, USE_CUDA=auto|1)" >&2; exit 1; }
	NVCC=$(NVCC) BUNDLE_SANITIZER=$(BUNDLE_SANITIZER) bash tests/gpu_bundle/make_bundle.sh $(BUILD) $@

test-gpu-bundle: $(GPU_BUNDLE)
	@$(MAKE) --no-print-directory deps DEB_PACKAGES=debootstrap
	FRESH_DIR=$(BUILD)/fresh bash tests/gpu_bundle/test_bundle.sh $(GPU_BUNDLE)

TEST_RUNS += test-gpu-checks
test-gpu-checks: $(if $(filter 1,$(CUDA_ON)),$(GPU_BUNDLE))
	bash tests/gpu_bundle/test_checks.sh $(if $(filter 1,$(CUDA_ON)),$(GPU_BUNDLE))
