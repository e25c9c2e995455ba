"""The paper's tables and figures re-run at this machine's scale (benchmarks/PAPER.md says which
command makes which file). Run each as a module from the repository root:

    python -m benchmarks.paper.t2_heads       Table 2   superbloom vs full / sampled / hierarchical softmax
    python -m benchmarks.paper.t3_layers      Table 3   one layer vs several, hashed and unhashed
    python -m benchmarks.paper.t6_beam        Table 6   beam width B vs rec@1/10/20
    python -m benchmarks.paper.t7_coherent    Table 7   random vs coherent hashing (appendix C)
    python -m benchmarks.paper.f3_frequency   Figure 3  rec@1 per label-frequency decile
    python -m benchmarks.paper.make_paper_md  PAPER.md from the result files

shared by them:

    datasets.py   the registry's datasets (benchmarks/datasets.py) prepared once; the evaluation examples
    runs.py       one cached training run, its rankings, the baselines' rankings
                  (models of equal size: superbloom/sizing.py)
    report.py     metric rows with confidence intervals, markdown tables, plots, result files

Work files (prepared datasets, trained models, cached rankings) go to runs/paper/ (git-ignored);
results (JSON, PNG) to benchmarks/results/paper/; PAPER.md draws their tables from the JSON.
"""
