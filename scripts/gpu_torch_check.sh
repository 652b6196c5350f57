#!/bin/bash
# The libtorch engine (feature `torch`) on a lent GPU machine: the CUDA check of the engine, its
# throughput, and a non-private ResNet-20-GN run sized to the time left. Not yet run on a GPU.
#
#   here (the development machine, torch venv installed):
#     bash scripts/gpu_torch_check.sh --prepare
#   builds with --features torch and puts stripped nn-train, nn-bench, the torch_engine test
#   binary and the CIFAR-10 JPEG copy under .dev/gpu (≈ 30 MB; .dev is git-ignored);
#   on the GPU machine (the device tool, carry [".dev/gpu"]), from the repository root:
#     bash scripts/gpu_torch_check.sh
#   writes to $OUT: machine.txt, torch_engine.log, throughput.json, train.json.
#
# The binaries link libtorch dynamically and need the libtorch they were built against
# (tch 0.26: torch 2.13). The GPU machine has no network, so its own PyTorch install is used: if
# its version differs, the script says so and stops (exit 3) before running anything.
#
#   PRIVPRED_DEVICE  cuda (default) or cpu (a dry run of this script on a machine without GPU)
#   GPU_TRAIN_S      seconds for the training run (default 330)
set -u
G=.dev/gpu
if [ "${1:-}" = "--prepare" ]; then
    set -e
    # shellcheck source=torch_env.sh
    source scripts/torch_env.sh
    T=${CARGO_TARGET_DIR:-target}
    cargo build --release -p privpred-nn --features torch --bins
    cargo test --release -p privpred-nn --features torch --test torch_engine --no-run
    mkdir -p "$G"
    strip -o "$G/nn-train" "$T/release/nn-train"
    strip -o "$G/nn-bench" "$T/release/nn-bench"
    test_bin=$(find "$T/release/deps" -maxdepth 1 -type f -executable -name 'torch_engine-*' \
        -printf '%T@ %p\n' | sort -nr | head -1 | cut -d' ' -f2-)
    strip -o "$G/torch_engine" "$test_bin"
    # the CIFAR-10 JPEG copy (docs/data.md): $CIFAR10_JPEG, else ../shared/data
    cp "${CIFAR10_JPEG:-../shared/data/cifar10-jpeg.tar.gz}" "$G/"
    du -sh "$G"
    exit 0
fi

O=${OUT:-/tmp/out}
mkdir -p "$O"
DEV=${PRIVPRED_DEVICE:-cuda}
export PRIVPRED_DEVICE=$DEV
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    echo "cores: $(nproc)"
    python3 -c 'import torch, os; print("torch", torch.__version__, os.path.dirname(torch.__file__), "cuda", torch.cuda.is_available())' 2>&1
} >"$O/machine.txt"
cat "$O/machine.txt"
read -r tv tdir < <(python3 -c 'import torch, os; print(torch.__version__, os.path.dirname(torch.__file__))' 2>/dev/null)
case "${tv:-none}" in
    2.13.*) ;;
    *)
        echo "needs libtorch 2.13 (tch 0.26); this machine has torch ${tv:-none}: nothing run" | tee -a "$O/machine.txt"
        exit 3
        ;;
esac
export LD_LIBRARY_PATH="$tdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# 1. The engine against the CPU engine, per example, on the device.
timeout 150 "$G/torch_engine" --test-threads 1 >"$O/torch_engine.log" 2>&1
echo "torch_engine: exit $?" | tee -a "$O/machine.txt"

# 2. Throughput at batch 600: non-private, DP-SGD joint, per-layer.
timeout 120 "$G/nn-train" --mode throughput --engine torch --data "$G/cifar10-jpeg.tar.gz" \
    --batch 600 --out "$O/throughput.json" >"$O/throughput.log" 2>&1
echo "throughput: exit $?" | tee -a "$O/machine.txt"

# 3. Non-private training with as many epochs as fit GPU_TRAIN_S at the measured speed
#    (the lr schedule is laid out over them; labelled by its epoch count), all 10,000 test images.
budget=${GPU_TRAIN_S:-330}
epochs=$(python3 -c '
import json, sys
try:
    r = json.load(open(sys.argv[1]))["throughput"]
    eps = [x["examples_per_s"] for x in r if x.get("mode") == "non-private"][0]
except Exception:
    eps = 0
print(max(1, min(100, int(0.8 * float(sys.argv[2]) * eps / 50000))))
' "$O/throughput.json" "$budget")
echo "training for $epochs epochs" | tee -a "$O/machine.txt"
timeout $((budget + 60)) "$G/nn-train" --engine torch --data "$G/cifar10-jpeg.tar.gz" \
    --epochs "$epochs" --batch 600 --time-limit-s "$budget" --out "$O/train.json" >"$O/train.log" 2>&1
echo "train: exit $?" | tee -a "$O/machine.txt"
