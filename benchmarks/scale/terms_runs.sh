#!/bin/bash
# The closed-form terms side by side (benchmarks/results/scale/terms.{json,md}): each dataset named on the
# command line (default: the two largest, text-sets and epinions) prepared once (benchmarks/datasets.py,
# into runs/term/data), then benchmarks/scale/terms.py with its grid below, all in one hold of the CPU
# lock; then --report joins every result in runs/terms.
#   flock /tmp/superbloom-cpu.lock bash benchmarks/scale/terms_runs.sh [DATASET ...]
cd "$(dirname "$0")/../.." || exit 1
D=runs/term/data
PY=.venv/bin/python
SETS=("$@")
[ ${#SETS[@]} -eq 0 ] && SETS=(text-sets epinions)
T="timeout 3000"
for s in "${SETS[@]}"; do
  $PY -c "from pathlib import Path; from benchmarks.datasets import prepare; prepare('$s', Path('$D') / '$s')" || exit 1
  case $s in
    text-sets) $T $PY -m benchmarks.scale.terms $D/$s --name terms_text_sets --eval-sets 1000 --local-grid 32:50:count:32 \
                 --sansa-grid 20:0.00002 ;;
    epinions) $T $PY -m benchmarks.scale.terms $D/$s --name terms_epinions --local-grid 32:50:count,32:50:cosine:64 \
                --sansa-grid 20:0.00002,20:0.0001 ;;
    video) $T $PY -m benchmarks.scale.terms $D/$s --name terms_video --ease-lams 100 --local-grid 32:50:count,64:50:cosine:128 \
             --sansa-grid 10:0.005 ;;
    *) $T $PY -m benchmarks.scale.terms $D/$s --name terms_$s --eval-sets 2000 \
         --local-grid 32:50:count,64:50:cosine:128,64:200:cosine:128 --ease-lams 100,300 --sansa-grid 10:0.005,100:0.02 ;;
  esac
done
$PY -m benchmarks.scale.terms --report terms
