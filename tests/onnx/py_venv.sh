#!/usr/bin/env bash
# Makes (once) the test-only virtual environment with PyTorch 2 and the ONNX tools from PyPI: py_venv.sh VENV.
# Prints VENV/bin/python. PyTorch's exporters (the default one needs onnxscript), onnx (reader, checker) and
# ONNX Runtime are the references the ONNX tests compare against; the benchmarks reuse the same venv.
# Without PyPI the first install fails loudly with pip's reason (tests must not skip).
set -euo pipefail
venv=${1:?usage: py_venv.sh VENV_DIR}
packages=(torch torchvision onnx onnxruntime onnxscript)
check='import torch, torchvision, onnx, onnxruntime, onnxscript'
if [ -f "$venv/.installed" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv" >&2 ||
  { echo "py_venv: '/usr/bin/python3 -m venv' failed: install python3-venv (make deps)" >&2; exit 1; }
echo "py_venv: installing ${packages[*]} into $venv from PyPI (once; a few GB with PyTorch's CUDA libraries)" >&2
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" > "$venv/pip.log" 2>&1; then
  echo "py_venv: 'pip install ${packages[*]}' into $venv failed. The ONNX tests need PyPI once to install" \
       "PyTorch and the ONNX reference tools; pip said:" >&2
  tail -5 "$venv/pip.log" >&2
  rm -rf "$venv"
  exit 1
fi
touch "$venv/.installed"
echo "$venv/bin/python"
