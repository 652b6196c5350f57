#!/bin/bash
# What runs on a lent GPU machine (16 cores, one NVIDIA H100/H200; no
# network), from the repository root, with `.dev/` holding the stripped release binaries
# (`privpred`, `nn-bench`), the gzipped MNIST IDX files under `.dev/data/mnist/` and the CIFAR-10
# JPEG copy. Results go to $OUT. Everything is time-limited so that the whole run fits one call.
#   1. PyTorch reference of ResNet-20-GN on the GPU (benches/resnet20_gn_reference.py);
#   2. the MNIST-1M substitute for fig4 (privpred data generate, all cores);
#   3. privpred-nn throughput at batch 600 on the CPU cores (non-private vs DP-SGD);
#   4. every linear figure in the paper and tight calibrations, 5 shards x 3 threads, merged and
#      resumed on the development machine afterwards (privpred merge / reproduce --resume).
set -u
D=.dev
O=${OUT:-/tmp/out}
mkdir -p "$O" runs
T0=$(date +%s)
left() { echo $(($1 - ($(date +%s) - T0))); }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; lscpu | grep "Model name"; } >"$O/machine.txt" 2>&1
PYTHONUNBUFFERED=1 timeout 545 python3 benches/resnet20_gn_reference.py "$D/cifar10-jpeg.tar.gz" \
  --epochs "${TORCH_EPOCHS:-100}" --time-limit-s 440 --out "$O/torch_ref.json" >"$O/torch_ref.log" 2>&1 &
export PRIVPRED_DATA_DIR=$PWD/$D/data
timeout 150 "$D/privpred" data generate mnist1m --n 1000000 --seed 0 >"$O/gen.log" 2>&1
echo "generate done at $(($(date +%s) - T0)) s" >>"$O/machine.txt"
RAYON_NUM_THREADS=15 timeout 90 "$D/nn-bench" 600 2 >"$O/nn_bench.log" 2>&1
echo "nn-bench done at $(($(date +%s) - T0)) s" >>"$O/machine.txt"
for k in 0 1 2 3 4; do
  RAYON_NUM_THREADS=3 timeout "$(left 550)" "$D/privpred" reproduce all --calibration paper,tight \
    --repetitions "${STUDY_REPS:-5}" --shard "$k/5" --out "runs/s$k" >"runs/s$k.log" 2>&1 &
done
wait
echo "all done at $(($(date +%s) - T0)) s" >>"$O/machine.txt"
tar czf "$O/study.tar.gz" runs
