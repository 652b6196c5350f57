#!/usr/bin/env bash
# Installs the PyTorch wheel that the `torch` feature of privpred / privpred-nn builds against
# (tch 0.24 needs torch==2.11.0 exactly: the PyTorch of the lent GPU machines) into a Python virtual environment, then prints the
# environment variables that building and running with `--features torch` need.
#
# Usage:  bash scripts/install_torch.sh          # install (idempotent) and print the exports
#         source scripts/torch_env.sh            # set those exports in the current shell
#
# Environment:
#   PRIVPRED_TORCH_VENV  where the venv lives (default: $HOME/.cache/privpred/torch-venv)
#   PRIVPRED_PYTHON      the Python 3 used to create the venv (default: python3)
#   PIP_FIND_LINKS etc.  honoured by pip as usual (e.g. a folder holding a downloaded wheel)
#
# The wheel is the default PyPI build: ~4.7 GB with its NVIDIA libraries. It runs on CUDA when
# a GPU and driver are present (no nvcc needed) and on the CPU otherwise.
set -euo pipefail

TORCH_VERSION="2.11.0"
VENV="${PRIVPRED_TORCH_VENV:-$HOME/.cache/privpred/torch-venv}"
PYTHON="${PRIVPRED_PYTHON:-python3}"

die() { echo "install_torch.sh: $*" >&2; exit 2; }

command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (set PRIVPRED_PYTHON to a Python 3 interpreter)"

installed_version() {
    PYTHONWARNINGS=ignore "$VENV/bin/python" -c 'import torch, sys; sys.stdout.write(torch.__version__.split("+")[0])' 2>/dev/null || true
}

if [ -x "$VENV/bin/python" ] && [ "$(installed_version)" = "$TORCH_VERSION" ]; then
    echo "torch $TORCH_VERSION already installed in $VENV" >&2
else
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating venv $VENV" >&2
        mkdir -p "$(dirname "$VENV")"
        "$PYTHON" -m venv "$VENV" || die "could not create a venv at $VENV (is python3-venv installed?)"
    fi
    echo "installing torch==$TORCH_VERSION into $VENV (about 4.7 GB with the NVIDIA libraries)" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2 || die "pip upgrade failed"
    "$VENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" >&2 || die "pip install torch==$TORCH_VERSION failed"
    got="$(installed_version)"
    [ "$got" = "$TORCH_VERSION" ] || die "torch in $VENV reports version '$got', expected $TORCH_VERSION"
fi

# numpy and Pillow: what the PyTorch reference (benches/resnet20_gn_reference.py) imports
# besides torch, so that the prepared GPU run's dry run on this machine runs it too.
if ! "$VENV/bin/python" -c 'import numpy, PIL' >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install --quiet numpy pillow >&2 || die "pip install numpy pillow failed"
fi

TORCH_LIB="$(PYTHONWARNINGS=ignore "$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
[ -d "$TORCH_LIB" ] || die "torch library folder $TORCH_LIB not found"

# torch-sys 0.24 (the build script of tch) runs `python` when VIRTUAL_ENV is set, else
# `python3`, from PATH, and with LIBTORCH_USE_PYTORCH=1 asks it where torch lives.
echo "# build and run with --features torch after these (or: source scripts/torch_env.sh)" >&2
cat <<EXPORTS
export LIBTORCH_USE_PYTORCH=1
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:\$PATH"
export LD_LIBRARY_PATH="$TORCH_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EXPORTS
