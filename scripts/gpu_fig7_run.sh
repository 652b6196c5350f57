#!/bin/bash
# The prepared run of figure 7 on a lent GPU machine (one NVIDIA H100/H200, 16 cores, PyTorch
# 2.11 in its python3, no network). Each run continues the figure from where the last one
# stopped: the state lives in the repository under study/fig7/ (results.jsonl, the cached
# predictions and the checkpoint of the training in progress), comes back as
# $OUT/fig7-state.tar.gz and is unpacked over study/fig7/ and committed.
#
#   here (the development machine; torch venv from scripts/install_torch.sh):
#     bash scripts/gpu_fig7_run.sh --prepare
#   builds with --features torch and puts stripped privpred, nn-train, the torch_engine test
#   binary and the CIFAR-10 JPEG copy under .dev/gpu (git-ignored; carry it);
#   on the GPU machine (device tool, carry [".dev/gpu"]), from the repository root:
#     bash scripts/gpu_fig7_run.sh
#   afterwards, here:
#     bash scripts/gpu_fig7_run.sh --collect DIR    # DIR: where $OUT's files landed
#
# Steps, each bounded in time so that the whole run ends within FIG7_TOTAL_S (default 540 s):
#   1. machine.txt: GPU, driver, torch; stops (exit 3) unless torch is 2.11 (tch 0.24's);
#   2. the torch engine against the CPU engine, per example, on the device (torch_engine.log);
#   3. throughput at batch 600: the PyTorch reference (benches/resnet20_gn_reference.py) and
#      privpred's engine, one after the other on the same GPU (torch_ref.json, throughput.json,
#      which records the engine's settings: examples per device pass, the CPU's time preparing
#      inputs), and the engine again at the CPU's 256 examples per pass
#      (PRIVPRED_TORCH_CHUNK=256: throughput-chunk256.json), so the run measures that lever;
#      throughput.json also times the 16 teachers' steps one after another against together in
#      one grouped pass, and training below takes whichever measured faster
#      (PRIVPRED_TEACHERS_TOGETHER; one after another when the measurement is missing);
#   4. `privpred reproduce fig7 --resume` (both panels) until the time is up (train.log), stopping
#      at an epoch boundary with a checkpoint.
#
#   PRIVPRED_DEVICE  cuda (default) or cpu (a dry run on a machine without a GPU)
#   FIG7_TOTAL_S     seconds for the whole run (default 540)
#   FIG7_QUICK=1     pass --quick to reproduce (dry runs)
#   FIG7_STEPS       which of check,throughput,train to run (default all three)
#   FIG7_STATE       the state folder (default study/fig7)
#   FIG7_TP_STEPS    timed rounds of the throughput measurement (default 5)
#   FIG7_TP_TEACHERS teachers in its grouped measurement (default 16; fewer for CPU dry runs)
set -u
G=.dev/gpu
STATE=${FIG7_STATE:-study/fig7}
if [ "${1:-}" = "--prepare" ]; then
    set -e
    # shellcheck source=torch_env.sh
    source scripts/torch_env.sh
    T=${CARGO_TARGET_DIR:-target}
    cargo build --release -p privpred --features torch --bin privpred
    cargo build --release -p privpred-nn --features torch --bin nn-train
    cargo test --release -p privpred-nn --features torch --test torch_engine --no-run
    mkdir -p "$G"
    strip -o "$G/privpred" "$T/release/privpred"
    strip -o "$G/nn-train" "$T/release/nn-train"
    test_bin=$(find "$T/release/deps" -maxdepth 1 -type f -executable -name 'torch_engine-*' \
        -printf '%T@ %p\n' | sort -nr | head -1 | cut -d' ' -f2-)
    strip -o "$G/torch_engine" "$test_bin"
    # the CIFAR-10 JPEG copy (docs/data.md): $CIFAR10_JPEG, else ../shared/data
    cp "${CIFAR10_JPEG:-../shared/data/cifar10-jpeg.tar.gz}" "$G/cifar10-jpeg.tar.gz"
    du -sh "$G"
    exit 0
fi
if [ "${1:-}" = "--collect" ]; then
    set -e
    src=${2:?usage: gpu_fig7_run.sh --collect DIR}
    mkdir -p "$STATE"
    tar xzf "$src/fig7-state.tar.gz" -C "$STATE"
    for f in machine.txt torch_engine.log torch_ref.json throughput.json throughput-chunk256.json; do
        [ -f "$src/$f" ] && cp "$src/$f" "$STATE/runs/$(cat "$STATE/runs/LAST")-$f"
    done
    echo "state unpacked into $STATE; review, then commit it"
    exit 0
fi

O=${OUT:-/tmp/out}
mkdir -p "$O" "$STATE/runs"
T0=$(date +%s)
TOTAL=${FIG7_TOTAL_S:-540}
left() { echo $((TOTAL - ($(date +%s) - T0))); }
DEV=${PRIVPRED_DEVICE:-cuda}
export PRIVPRED_DEVICE=$DEV PRIVPRED_NN_ENGINE=torch
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
echo "$RUN_ID" >"$STATE/runs/LAST"
{
    echo "run $RUN_ID device $DEV"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
    echo "cores: $(nproc)"
    python3 -c 'import torch, os; print("torch", torch.__version__, os.path.dirname(torch.__file__), "cuda", torch.cuda.is_available())' 2>&1
    sha256sum "$G/cifar10-jpeg.tar.gz"
} >"$O/machine.txt"
cat "$O/machine.txt"
read -r tv tdir < <(python3 -c 'import torch, os; print(torch.__version__, os.path.dirname(torch.__file__))' 2>/dev/null)
case "${tv:-none}" in
    2.11.*) ;;
    *)
        echo "needs libtorch 2.11 (tch 0.24); this machine has torch ${tv:-none}: nothing run" | tee -a "$O/machine.txt"
        exit 3
        ;;
esac
export LD_LIBRARY_PATH="$tdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
stamp() { echo "$1 at $(($(date +%s) - T0)) s" | tee -a "$O/machine.txt"; }

STEPS=",${FIG7_STEPS:-check,throughput,train},"

# 2. The engine against the CPU engine, per example, on the device, in exact fp32:
#    NVIDIA_TF32_OVERRIDE=0 turns off the TF32 convolutions that cuDNN uses by default (with
#    them, per-example gradients differ from fp32 by ~4e-3 relative; training keeps them).
if [[ $STEPS == *,check,* ]]; then
    NVIDIA_TF32_OVERRIDE=0 timeout 100 "$G/torch_engine" --test-threads 1 >"$O/torch_engine.log" 2>&1
    stamp "torch_engine (fp32): exit $?"
fi

# 3. Throughput at batch 600, the PyTorch reference first, then privpred's engine.
if [[ $STEPS == *,throughput,* ]]; then
    PYTHONUNBUFFERED=1 timeout 120 python3 benches/resnet20_gn_reference.py "$G/cifar10-jpeg.tar.gz" \
        --epochs 100 --time-limit-s "${FIG7_REF_S:-25}" --out "$O/torch_ref.json" >"$O/torch_ref.log" 2>&1
    stamp "reference: exit $?"
    timeout 150 "$G/nn-train" --mode throughput --engine torch --data "$G/cifar10-jpeg.tar.gz" \
        --batch 600 --steps "${FIG7_TP_STEPS:-5}" --teachers "${FIG7_TP_TEACHERS:-16}" \
        --out "$O/throughput.json" >"$O/throughput.log" 2>&1
    stamp "throughput: exit $?"
    PRIVPRED_TORCH_CHUNK=256 timeout 60 "$G/nn-train" --mode throughput --engine torch \
        --data "$G/cifar10-jpeg.tar.gz" --batch 600 --steps "${FIG7_TP_STEPS:-5}" --teachers 0 \
        --out "$O/throughput-chunk256.json" >"$O/throughput-chunk256.log" 2>&1
    stamp "throughput at 256 examples per pass: exit $?"
    # the teachers train together (one grouped pass) only if this run measured that faster;
    # without a measurement (the grouped pass failed?) one after another, the path known to run
    together=$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["teachers"]; print(1 if t["together_speedup"] > 1 else 0)' "$O/throughput.json" 2>/dev/null)
    if [ -n "$together" ]; then
        export PRIVPRED_TEACHERS_TOGETHER=$together
        stamp "teachers together: $together (from the measured speed-up)"
    else
        export PRIVPRED_TEACHERS_TOGETHER=0
        stamp "teachers together: 0 (no measurement)"
    fi
fi

# 4. Figure 7, from where the last run stopped, until the time is up.
quick=()
[ "${FIG7_QUICK:-0}" = "1" ] && quick=(--quick)
budget=$(($(left) - 40))
if [[ $STEPS != *,train,* ]]; then
    stamp "reproduce: not asked for"
elif [ "$budget" -gt 30 ]; then
    timeout $((budget + 30)) "$G/privpred" reproduce fig7 "${quick[@]}" --resume \
        --data-dir "$G" --out "$STATE" --nn-time-limit-s "$budget" >"$O/train.log" 2>&1
    rc=$?
    # exit 3: the time limit stopped training with its checkpoint kept (resumable), not a failure
    if [ "$rc" = 3 ]; then
        stamp "reproduce: stopped at its time limit, resumable (exit 3, budget $budget s)"
    else
        stamp "reproduce: exit $rc (budget $budget s)"
    fi
else
    stamp "reproduce: skipped, $budget s left"
fi
cp "$O/train.log" "$STATE/runs/$RUN_ID-train.log" 2>/dev/null
tar czf "$O/fig7-state.tar.gz" -C "$STATE" --exclude='*.safetensors' --exclude='*.params' .
ls -la "$O"
stamp "done"
