#!/bin/sh
# Every paper table in order, then PAPER.md. t6_beam and f3_frequency reuse the models that
# t2_heads and t3_layers trained (runs/paper/), so in this order they only decode and plot.
# On a shared machine hold the CPU lock for the whole run:
#     flock /tmp/superbloom-cpu.lock benchmarks/paper/run_all.sh
set -e
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
for script in t2_heads t3_layers t7_coherent t6_beam f3_frequency; do
    echo "== $script"
    $PY benchmarks/paper/$script.py
done
$PY benchmarks/paper/make_paper_md.py
