"""The paper's tables and figures re-run at this machine's scale; benchmarks/PAPER.md says which
module makes which result file. Run from the repository root, e.g. `python -m benchmarks.paper.t2_heads`.

    datasets.py   the shared datasets (SOURCES), prepared once; the evaluation examples
    runs.py       one cached training run, its rankings, the baselines' rankings, matched widths
    report.py     metric rows with intervals, markdown tables, plots, result files
"""
