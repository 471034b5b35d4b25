#!/bin/sh
# A stand-in nvidia-smi for the no-GPU tests of run-gpu-checks.sh (test_checks.sh, test_bundle.sh): answers the
# queries the script makes as a machine with one H100 and driver $FAKE_DRIVER (default 580.65.06) would.
driver=${FAKE_DRIVER:-580.65.06}
case "$*" in
  *--query-gpu=name,driver_version*) echo "NVIDIA H100 80GB HBM3, $driver" ;;
  *--query-gpu=driver_version*) echo "$driver" ;;
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "NVIDIA-SMI $driver    Driver Version: $driver    CUDA Version: 13.0 (a stand-in, tests/gpu_bundle)" ;;
esac
