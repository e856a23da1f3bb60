#!/bin/sh
# A throwaway venv with msprobe (PyPI `mindstudio-probe`), the reference `msprobe compare --mode torchair`, for
# bench/bench_msprobe.py's speed baseline. It lives in build/msprobe-venv, apart from the project's .venv: msprobe
# is never imported by tcmp and never installed next to it. msprobe's torchair compare imports torch (CPU build
# here, from PyTorch's CPU index; TORCH_INDEX= (empty) takes torch from pip's usual sources instead). Pinned so
# the measured baseline stays the same code. pandas stays below 3: msprobe 26.2.0 writes its report with
# `fillna(value="")` on float columns, which pandas 3 refuses (TypeError) as soon as a metric is NaN.
#
#     sh bench/msprobe_env.sh            (from the repository root; rm -rf build/msprobe-venv to start over)
set -eu
PYTHON=${PYTHON:-python3}
VENV=build/msprobe-venv
MSPROBE_VERSION=26.2.0
TORCH_VERSION=2.13.0
PANDAS_VERSION=2.3.3
TORCH_INDEX=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
"$VENV/bin/python" -m pip install --quiet "mindstudio-probe==$MSPROBE_VERSION" "pandas==$PANDAS_VERSION"
"$VENV/bin/msprobe" --help > /dev/null
echo "msprobe $MSPROBE_VERSION installed in $VENV (torch $TORCH_VERSION CPU, pandas $PANDAS_VERSION)"
