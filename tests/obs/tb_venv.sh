#!/usr/bin/env bash
# Makes (once) the test-only virtual environment with the real TensorBoard reader from PyPI: tb_venv.sh VENV.
# Prints VENV/bin/python. Without PyPI the first install fails loudly with pip's reason (tests must not skip).
set -euo pipefail
venv=${1:?usage: tb_venv.sh VENV_DIR}
if [ -f "$venv/.installed" ] && "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv" >&2 ||
  { echo "tb_venv: '/usr/bin/python3 -m venv' failed: install python3-venv (make deps)" >&2; exit 1; }
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check tensorboard > "$venv/pip.log" 2>&1; then
  echo "tb_venv: 'pip install tensorboard' into $venv failed. The TensorBoard round-trip test needs PyPI once" \
       "to install the real TensorBoard reader; pip said:" >&2
  tail -5 "$venv/pip.log" >&2
  rm -rf "$venv"
  exit 1
fi
touch "$venv/.installed"
echo "$venv/bin/python"
