#!/bin/bash
# The closed-form terms side by side on every dataset (benchmarks/results/scale/terms.{json,md}): each
# dataset prepared once (benchmarks/datasets.py, into runs/term/data), then benchmarks/scale/terms.py
# with the grids below (the decisive sizes first), all in one hold of the CPU lock; then --report.
#   flock /tmp/superbloom-cpu.lock bash benchmarks/scale/terms_runs.sh
cd "$(dirname "$0")/../.." || exit 1
D=runs/term/data
PY=.venv/bin/python
$PY -c "
from pathlib import Path; from benchmarks.datasets import prepare
for n in ('text-sets', 'epinions', 'beauty-s3rec', 'wikispeedia', 'lastfm', 'toys', 'fb15k237', 'video'):
    prepare(n, Path('$D') / n)"
T="timeout 3000"
$T $PY -m benchmarks.scale.terms $D/text-sets --name terms_text_sets --eval-sets 1000 --local-grid 32:50:count:32,32:50:cosine:32 --sansa-grid 20:0.00002
$T $PY -m benchmarks.scale.terms $D/epinions --name terms_epinions --local-grid 32:50:count,32:50:cosine:64 --sansa-grid 20:0.00002,20:0.0001
for s in beauty-s3rec wikispeedia lastfm toys fb15k237; do
  $T $PY -m benchmarks.scale.terms $D/$s --name terms_$s --eval-sets 2000 --local-grid 32:50:count,64:50:cosine:128,64:200:cosine:128 --ease-lams 100,300 --sansa-grid 10:0.005,100:0.02
done
$T $PY -m benchmarks.scale.terms $D/video --name terms_video --ease-lams 100 --local-grid 32:50:count,64:50:cosine:128 --sansa-grid 10:0.005
$PY -m benchmarks.scale.terms --report terms
