# shellcheck shell=bash
# Sets the environment that building and running privpred with `--features torch` needs, for
# the venv made by scripts/install_torch.sh. Source it:  source scripts/torch_env.sh
#
#   PRIVPRED_TORCH_VENV  the venv (default: $HOME/.cache/privpred/torch-venv)
#
# Exports LIBTORCH_USE_PYTORCH=1 and VIRTUAL_ENV/PATH (torch-sys's build script asks the venv's
# `python` where torch is), and LD_LIBRARY_PATH to torch/lib (libtorch at run time).
_privpred_venv="${PRIVPRED_TORCH_VENV:-$HOME/.cache/privpred/torch-venv}"
_privpred_lib=""
for _d in "$_privpred_venv"/lib/python3*/site-packages/torch/lib; do
    if [ -d "$_d" ]; then _privpred_lib="$_d"; fi
done
if [ ! -x "$_privpred_venv/bin/python" ] || [ -z "$_privpred_lib" ]; then
    echo "torch_env.sh: no torch venv at $_privpred_venv (run: bash scripts/install_torch.sh)" >&2
    unset _privpred_venv _privpred_lib _d
    return 2 2>/dev/null || exit 2
fi
export LIBTORCH_USE_PYTORCH=1
export VIRTUAL_ENV="$_privpred_venv"
case ":$PATH:" in
    *":$_privpred_venv/bin:"*) ;;
    *) export PATH="$_privpred_venv/bin:$PATH" ;;
esac
case ":${LD_LIBRARY_PATH:-}:" in
    *":$_privpred_lib:"*) ;;
    *) export LD_LIBRARY_PATH="$_privpred_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac
unset _privpred_venv _privpred_lib _d
