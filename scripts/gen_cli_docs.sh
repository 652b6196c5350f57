#!/usr/bin/env bash
# Writes docs/cli.md, the command-line reference, from the binary's `--help` output (the clap
# definitions), or with --check verifies that the checked-in file still matches it. Both run
# the test `cli_reference_matches_the_binary` of crates/privpred/tests/docs_commands.rs, which
# holds the one generator; extra arguments go to cargo (e.g. --release).
#
#   bash scripts/gen_cli_docs.sh            # regenerate docs/cli.md
#   bash scripts/gen_cli_docs.sh --check    # exit 1 when docs/cli.md is out of date
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
cargo_args=()
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        *) cargo_args+=("$a") ;;
    esac
done
if [ "$check" = 1 ]; then
    cargo test "${cargo_args[@]}" -p privpred --test docs_commands -- --exact cli_reference_matches_the_binary
else
    PRIVPRED_UPDATE_CLI_DOCS=1 cargo test "${cargo_args[@]}" -p privpred --test docs_commands -- --exact cli_reference_matches_the_binary
    echo "wrote docs/cli.md"
fi
