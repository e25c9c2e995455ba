#!/bin/bash
# The bar at 5,139,571 SYNTHETIC ids (benchmarks/results/scale/synth5m_anytime.{json,md,png}): the default
# recipe's first answer (`superbloom train DATA --out M`, no recipe flag: the millions preset, its term fitted
# and written before its validation) and budget 0 (stopped after the step-0 validation) against popularity
# and counting (co-occurrence count, and cosine) on the same 1,000 held-out examples, one thread. The data:
# e2e7's recipe (synth --ids 5.3M --links 50M --zipf 0.8, then the out-of-core prepare). Run in one hold of
# the CPU lock:
#   flock /tmp/superbloom-cpu.lock bash benchmarks/scale/synth5m_bar.sh
cd "$(dirname "$0")/../.." || exit 1
PY=.venv/bin/python
E=${E2E:-/tmp/sb/e2e_tq}
W=${WORK:-/tmp/sb/tq/synth5m_anytime}
$PY -m benchmarks.scale.e2e --work "$E" --stages synth,prepare --ids 5300000 --links 50000000 --zipf 0.8 \
  --name synth5m_anytime_data || exit 1
rm -f benchmarks/results/scale/synth5m_anytime_data.json benchmarks/results/scale/synth5m_anytime_data.md  # the data stages' own report: its figures are in the note
$PY -m benchmarks.scale.time_to_quality "$E/data" --work "$W" --budgets 0 --threads 1 \
  --baselines popularity,cooc-count,cooc-cosine || exit 1
NOTE="SYNTHETIC data, e2e7's recipe (synth --ids 5.3M --links 50M --zipf 0.8, out-of-core prepare). The default recipe: \`superbloom train DATA --out M\` with no recipe flag (the millions preset), one thread: its first answer (the first checkpoint, the term alone) and budget 0 (the step-0 validation's choice). Baselines: each fitted on the training sets in its own process on one thread."
$PY -m benchmarks.scale.time_to_quality "$E/data" --work "$W" --budgets 0 --report --name synth5m_anytime --note "$NOTE"
