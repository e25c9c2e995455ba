#!/bin/sh
# Every paper table in order, then PAPER.md. t6_beam and f3_frequency reuse the models that
# t2_heads and t3_layers trained (runs/paper/), so in this order they only decode and plot.
# A failing script is reported and the next one still runs; the exit status counts failures.
# On a shared machine hold the CPU lock for the whole run:
#     flock /tmp/superbloom-cpu.lock sh benchmarks/paper/run_all.sh
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
failed=0
for script in t2_heads t3_layers t7_coherent t6_beam f3_frequency make_paper_md; do
    echo "== $script $(date -u +%H:%M:%S)"
    $PY -m benchmarks.paper.$script || { echo "!! $script failed (exit $?)"; failed=$((failed + 1)); }
done
exit $failed
