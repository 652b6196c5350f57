#!/usr/bin/env bash
# Equality check for behaviour-preserving refactors: runs two `privpred` binaries
# on the same seeded work and compares what they write byte for byte.
#
#   scripts/equality_check.sh BEFORE_BIN AFTER_BIN [WORKDIR]
#
# Work done with each binary (every random draw seeded):
#   - `reproduce fig1a|fig2a|fig6b --quick --seed 7` (MNIST, cached in ~/.cache/privpred);
#   - `train METHOD --dataset digits --seed 3 --json` for the non-private model and the five
#     private linear methods (λ, and DP-SGD's clip, cross-validated), then
#     `evaluate --repetitions 3 --seed 5 --json` of each trained model.
#
# Compared byte for byte:
#   - reproduce: results.csv, results.jsonl, summary.csv, summary.md, manifest.json and the
#     SVG plots; results.partial.jsonl sorted by line (units finish in thread order);
#   - train: the safetensors artifact (its tensor bytes exactly; its JSON header as parsed,
#     with keys sorted, embedded JSON strings included) and the --json summary;
#   - evaluate: the --json output.
#
# Masked, because they legitimately differ from run to run (and nothing else is):
#   - reproduce: timings.jsonl (wall times; skipped whole), the PNG plots (rasterised
#     text may differ with font caching; the SVGs carry the same data), stdout/stderr
#     (progress lines with wall times and the output directory);
#   - train artifact: the order of the header's keys (the safetensors writer keeps its
#     metadata in a hash map, so the order changes from run to run of the same binary);
#   - train --json: "seconds" (wall time) and "out" (the output path, which differs per
#     binary's work directory);
#   - evaluate --json: "seconds" (wall time) and "model" (the path of the model file).
#
# Comparing across a change of defaults (e.g. study --bias √½ → 0 and --cv-draws 1 → 5
# after 20c5d53), AFTER is given BEFORE's defaults explicitly:
#   EQ_AFTER_ARGS            extra arguments for AFTER's reproduce and train commands;
#   EQ_AFTER_REPRODUCE_ARGS  extra arguments for AFTER's reproduce commands only;
#   EQ_AFTER_TRAIN_ARGS      extra arguments for AFTER's train commands only.
# (BEFORE's commands and every evaluate command are unchanged.)
# Exit 0 when everything compared is equal, 1 otherwise (the differing files are listed).
set -u -o pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN [WORKDIR]" >&2
    exit 2
fi
BEFORE=$(realpath "$1")
AFTER=$(realpath "$2")
WORK=${3:-$(mktemp -d /tmp/privpred-eq.XXXXXX)}
mkdir -p "$WORK"
FIGURES=${EQ_FIGURES:-"fig1a fig2a fig6b"}
METHODS="non-private model-sensitivity loss-perturbation dp-sgd prediction-sensitivity subsample-aggregate"

# Drops the masked keys from a JSON document (key paths at the top level only).
mask_json() { # FILE KEY...
    local f=$1
    shift
    local filter='.'
    for k in "$@"; do filter="$filter | del(.\"$k\")"; done
    jq -S "$filter" "$f"
}

# A safetensors file in canonical form: header JSON with sorted keys (metadata values that
# hold JSON parsed and sorted too), then the SHA-256 of the tensor bytes.
canon_safetensors() { # FILE
    python3 - "$1" <<'PY'
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k, v in h.get("__metadata__", {}).items():
    try:
        h["__metadata__"][k] = json.loads(v)
    except ValueError:
        pass
print(json.dumps(h, sort_keys=True, indent=1))
print("tensor bytes sha256", hashlib.sha256(b[8 + n:]).hexdigest(), len(b) - 8 - n)
PY
}

run_all() { # BIN DIR [REPRODUCE_ARGS [TRAIN_ARGS]] (extra arguments, word-split)
    local bin=$1 dir=$2
    local -a rargs targs
    read -r -a rargs <<<"${3:-}"
    read -r -a targs <<<"${4:-}"
    mkdir -p "$dir"
    for fig in $FIGURES; do
        "$bin" reproduce "$fig" --quick --seed 7 "${rargs[@]}" --out "$dir/$fig" >"$dir/$fig.log" 2>&1 ||
            { echo "reproduce $fig failed with $bin (see $dir/$fig.log)" >&2; return 1; }
    done
    for m in $METHODS; do
        local extra=()
        case $m in
            non-private) ;;
            dp-sgd) extra=(--epsilon 1 --delta 1e-5) ;;
            *) extra=(--epsilon 1) ;;
        esac
        "$bin" train "$m" --dataset digits --seed 3 "${extra[@]}" "${targs[@]}" \
            --out "$dir/$m.safetensors" --json >"$dir/train-$m.json" 2>"$dir/train-$m.err" ||
            { echo "train $m failed with $bin (see $dir/train-$m.err)" >&2; return 1; }
        "$bin" evaluate --model "$dir/$m.safetensors" --dataset digits --repetitions 3 --seed 5 \
            --json >"$dir/evaluate-$m.json" 2>"$dir/evaluate-$m.err" ||
            { echo "evaluate $m failed with $bin (see $dir/evaluate-$m.err)" >&2; return 1; }
    done
}

echo "before: $BEFORE"
echo "after:  $AFTER"
echo "work:   $WORK"
run_all "$BEFORE" "$WORK/before" || exit 1
AFTER_R="${EQ_AFTER_ARGS:-} ${EQ_AFTER_REPRODUCE_ARGS:-}"
AFTER_T="${EQ_AFTER_ARGS:-} ${EQ_AFTER_TRAIN_ARGS:-}"
[ -n "${AFTER_R// /}" ] && echo "after's reproduce also gets: $AFTER_R"
[ -n "${AFTER_T// /}" ] && echo "after's train also gets: $AFTER_T"
run_all "$AFTER" "$WORK/after" "$AFTER_R" "$AFTER_T" || exit 1

fail=0
same() { # LABEL FILE_A FILE_B
    if cmp -s "$2" "$3"; then
        echo "equal    $1"
    else
        echo "DIFFERENT $1"
        diff <(head -c 200000 "$2") <(head -c 200000 "$3") | head -20
        fail=1
    fi
}
for fig in $FIGURES; do
    for f in results.csv results.jsonl summary.csv summary.md manifest.json; do
        same "$fig/$f" "$WORK/before/$fig/$f" "$WORK/after/$fig/$f"
    done
    same "$fig/results.partial.jsonl (sorted)" \
        <(sort "$WORK/before/$fig/results.partial.jsonl") <(sort "$WORK/after/$fig/results.partial.jsonl")
    for svg in "$WORK/before/$fig"/*.svg; do
        [ -e "$svg" ] || continue
        same "$fig/$(basename "$svg")" "$svg" "$WORK/after/$fig/$(basename "$svg")"
    done
done
for m in $METHODS; do
    same "train $m: artifact (header keys sorted)" \
        <(canon_safetensors "$WORK/before/$m.safetensors") \
        <(canon_safetensors "$WORK/after/$m.safetensors")
    same "train $m: --json (masked: seconds, out)" \
        <(mask_json "$WORK/before/train-$m.json" seconds out) \
        <(mask_json "$WORK/after/train-$m.json" seconds out)
    same "evaluate $m: --json (masked: seconds, model)" \
        <(mask_json "$WORK/before/evaluate-$m.json" seconds model) \
        <(mask_json "$WORK/after/evaluate-$m.json" seconds model)
done
if [ $fail -eq 0 ]; then
    echo "EQUAL: every compared output is byte-identical"
else
    echo "NOT EQUAL: see the differences above"
fi
exit $fail
