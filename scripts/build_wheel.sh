#!/usr/bin/env bash
# Builds the Python package as one portable wheel and tests it the way a user installs it.
#
# 1. Build: maturin (from PyPI) with zig (the `ziglang` wheel from PyPI) as the linker, so the
#    wheel is abi3 (one wheel for CPython >= 3.9) and manylinux2014 (glibc >= 2.17: any
#    mainstream Linux of the last ten years); the extension is stripped (pyproject.toml).
# 2. Check: `twine check --strict` (the metadata PyPI would accept), the installed size.
# 3. Test: a clean virtual environment with no Rust toolchain on PATH installs the wheel,
#    and the Python tests (python/tests) run against that install, not the sources; so does
#    the README's Python step (crates/privpred/tests/docs_commands.rs, PRIVPRED_PYTHON).
#
# Usage: scripts/build_wheel.sh [--no-test]
# Environment: PYTHON (default python3); PRIVPRED_WHEEL_DIR (default target/wheels);
# CARGO_TARGET_DIR as for cargo; CARGO_BUILD_JOBS to limit the build; the tests read
# PRIVPRED_BIN and PRIVPRED_REQUIRE_DATA as usual.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
OUT=${PRIVPRED_WHEEL_DIR:-target/wheels}
MAX_INSTALLED_BYTES=$((20 * 1000 * 1000))
run_tests=1
if [ "${1:-}" = "--no-test" ]; then run_tests=0; fi

work=$(mktemp -d /tmp/privpred-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT

# --- 1. build -------------------------------------------------------------------------
"$PY" -m venv "$work/build"
"$work/build/bin/pip" install -q --upgrade pip
"$work/build/bin/pip" install -q "maturin>=1.5,<2" ziglang twine
mkdir -p "$OUT"
rm -f "$OUT"/privpred-*.whl
start=$(date +%s)
# maturin finds zig through `python -m ziglang` of the interpreter first on PATH
PATH="$work/build/bin:$PATH" "$work/build/bin/maturin" build --release --zig \
    --compatibility manylinux2014 --manifest-path python/Cargo.toml --out "$OUT"
echo "wheel built in $(($(date +%s) - start)) s"
wheel=$(ls "$OUT"/privpred-*.whl)
case "$wheel" in
    *-abi3-manylinux*2_17*x86_64*.whl | *-abi3-manylinux*2_17*aarch64*.whl) ;;
    *) echo "error: $wheel is not an abi3 manylinux2014 wheel" >&2; exit 1 ;;
esac

# --- 2. check -------------------------------------------------------------------------
"$work/build/bin/twine" check --strict "$wheel"
echo "wheel: $wheel ($(stat -c %s "$wheel") bytes)"

# --- 3. install where no Rust toolchain is on PATH, and test that install ---------------
# PATH without any directory holding cargo or rustc (e.g. ~/.cargo/bin)
clean_path=""
IFS=: read -r -a dirs <<< "$PATH"
for d in "${dirs[@]}"; do
    if [ -n "$d" ] && [ ! -e "$d/cargo" ] && [ ! -e "$d/rustc" ]; then
        clean_path="${clean_path:+$clean_path:}$d"
    fi
done
"$PY" -m venv "$work/user"
user_py="$work/user/bin/python"
env PATH="$work/user/bin:$clean_path" sh -c '
    if command -v cargo >/dev/null || command -v rustc >/dev/null; then
        echo "error: a Rust toolchain is still on PATH" >&2; exit 1
    fi'
env PATH="$work/user/bin:$clean_path" "$work/user/bin/pip" install -q --upgrade pip
env PATH="$work/user/bin:$clean_path" "$work/user/bin/pip" install -q "$wheel" pytest dp-accounting numpydoc pandas
installed=$("$user_py" - <<'EOF'
import os, privpred
root = os.path.dirname(privpred.__file__)
print(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs))
EOF
)
echo "installed size: $installed bytes (limit $MAX_INSTALLED_BYTES)"
if [ "$installed" -gt "$MAX_INSTALLED_BYTES" ]; then
    echo "error: the installed package is larger than $MAX_INSTALLED_BYTES bytes" >&2
    exit 1
fi
if [ "$run_tests" = 1 ]; then
    # from python/tests, so `import privpred` can only find the installed wheel
    (cd python/tests && env PATH="$work/user/bin:$clean_path" "$user_py" -c '
import privpred, sys
assert "/site-packages/" in privpred.__file__, privpred.__file__
print("testing", privpred.__file__)' \
        && env PATH="$work/user/bin:$clean_path" "$user_py" -m pytest -q -p no:cacheprovider .)
    # The README's Python step against the same install: the docs test runs the snippet with
    # PRIVPRED_PYTHON (cargo is looked up on the original PATH; the interpreter needs none).
    if command -v cargo >/dev/null; then
        log=$(mktemp /tmp/privpred-readme-python.XXXXXX)
        PRIVPRED_PYTHON="$user_py" cargo test --release -p privpred --test docs_commands \
            -- --exact readme_python_step_runs 2>&1 | tee "$log"
        if grep -q "privpred-test-skip: docs_commands::readme_python_step_runs" "$log"; then
            echo "error: the README's Python step skipped with PRIVPRED_PYTHON set" >&2
            exit 1
        fi
        rm -f "$log"
    else
        echo "note: cargo not on PATH: the README's Python step (docs_commands) was not run" >&2
    fi
fi
