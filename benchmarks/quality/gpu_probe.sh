#!/usr/bin/env bash
# Issue 33 on a lent GPU (the device tool runs this from the repository root, $OUT its result folder):
# the network alone (`net`, and 4x its width) at 5x the CPU recipe's 2,000 steps, beside EASE, and the
# CUDA tests. Carry runs/quality/data (the prepared datasets; never committed). One shot: every run
# stops training at 360 s (the recipe's time budget) and the results come back as one tar file.
set -u
export PYTHONPATH=$PWD
R=$OUT/r && mkdir -p "$R"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; python3 -c "import torch; print(torch.__version__)"; } > "$R/machine.txt" 2>&1
(timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_heads.py tests/test_head_math.py \
  tests/test_decode.py tests/test_allow.py tests/test_hashed_hybrid.py tests/test_hashed_hybrid_weighting.py \
  tests/test_objectives.py tests/test_sequence_train.py > "$R/cuda_tests.txt" 2>&1) &
run() {  # dataset recipe split
  timeout 480 python3 -m benchmarks.quality.harness --datasets "$1" --recipes "$2" --steps 10000 --split "$3" \
    --threads 1 --baselines ease --name "quality_$2_$1_$3" > "$R/log_$2_$1_$3.txt" 2>&1
  cp runs/quality/models/"$1-$3"/"$2"-10000/metrics.jsonl "$R/metrics_$2_$1_$3.jsonl" 2>/dev/null
}
for ds in wikispeedia lastfm; do
  run $ds gpu_net val & run $ds gpu_net test & run $ds gpu_net_d512 val &
done
run beauty gpu_net val &
wait
cp benchmarks/results/quality_gpu_* "$R/" 2>/dev/null
cd "$OUT" && tar czf r.tgz r && rm -rf r
