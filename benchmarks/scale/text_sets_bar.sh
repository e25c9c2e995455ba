#!/bin/bash
# The bar at 1,005,296 real ids (benchmarks/results/scale/text_sets_anytime.{json,md,png}): the default
# recipe (`superbloom train DATA --out M`, no recipe flag: the millions preset, the local-EASE term fitted
# and written before its validation, then the network) against the closed forms on the same 1,000 held-out
# examples, one thread. Stage 1: the baselines (each fit in its own process) and the recipe's first answer
# (the moment its first checkpoint lands, snapshotted) and budget 0 (stopped after the step-0 validation). Stage 2: the training budgets chosen so that the cumulative wall seconds land near 1.4x and 1.9x
# the best closed form's fit seconds T (the bar's 1.5x and 2x, less a margin for the resumed segment's
# start-up, RESUME_S), then the report. Stage 3 (unless SANSA=0): SANSA beside them, the report again.
# Run in one hold of the CPU lock:
#   flock /tmp/superbloom-cpu.lock bash benchmarks/scale/text_sets_bar.sh
cd "$(dirname "$0")/../.." || exit 1
PY=.venv/bin/python
D=runs/term/data/text-sets
W=${WORK:-runs/term/tq_text_sets}
RESUME_S=${RESUME_S:-90}
$PY -c "from pathlib import Path; from benchmarks.datasets import prepare; prepare('text-sets', Path('$D'))" || exit 1
$PY -m benchmarks.scale.time_to_quality $D --work $W --budgets 0 --threads 1 \
  --baselines popularity,local-ease || exit 1
BUDGETS=$($PY - "$W" "$RESUME_S" <<'PY'
import json, sys
from pathlib import Path
import numpy as np
work, resume = Path(sys.argv[1]), float(sys.argv[2])
base = json.loads((work / "baselines.json").read_text())["baselines"]
hits = {n: float(((z := np.load(work / "baselines" / f"{n}.npz")["ranks"]) > 0).__and__(z <= 10).mean())
        for n, b in base.items() if "rec@10" in b and n not in ("als", "item2vec")}
best = max(hits, key=hits.get)
t = base[best]["fit_s"]
state = json.loads((work / "state.json").read_text())
seg0 = next(s for s in state["segments"] if s["budget"] == 0)
w0, trained0 = seg0["train"]["wall_s"], seg0["trained_s"]
b1 = max(60.0, 1.4 * t - w0 - resume + trained0)
b2 = max(b1 + 60.0, b1 + 0.5 * t - resume)
print(f"best closed form {best} (rec@10 {hits[best]:.4f}, fit {t} s); first answer at {w0} s", file=sys.stderr)
print(f"0,{b1:.0f},{b2:.0f}")
PY
) || exit 1
echo "budgets $BUDGETS"
$PY -m benchmarks.scale.time_to_quality $D --work $W --budgets "$BUDGETS" --threads 1 || exit 1
NOTE="The default recipe: \`superbloom train DATA --out M\` with no recipe flag (the millions preset, \`--item-term auto\`: local EASE), one thread; budgets $BUDGETS chosen by benchmarks/scale/text_sets_bar.sh from the best closed form's fit seconds. Baselines: each fitted on the training sets in its own process on one thread; local-ease: the registry's baseline, the recipe's term (fitted on every training set, the recipe's on the training sets less its validation); sansa (when stage 3 ran): l2 20, density 2e-5, fitted after the model's budgets. The co-occurrence index baselines are left out here (their ranking takes 0.3-0.85 s a query at this size, 5-14 min for these examples): the cosine term alone is in scale/terms.md on these examples."
REPORT=(--budgets "$BUDGETS" --report --name text_sets_anytime --note "$NOTE")
$PY -m benchmarks.scale.time_to_quality $D --work $W "${REPORT[@]}" || exit 1
# stage 3 (SANSA=1): SANSA on the same examples, after the model (a baseline already fitted is kept), and the report again
[ "${SANSA:-1}" = 1 ] || exit 0
$PY -m benchmarks.scale.time_to_quality $D --work $W --budgets "$BUDGETS" --threads 1 --baselines sansa \
  --baselines-args "--sansa l2=20,density=2e-5" || exit 1
$PY -m benchmarks.scale.time_to_quality $D --work $W "${REPORT[@]}"
