"""Benchmark scripts of superbloom (not part of the installed package). Run them as modules from
the repository root, e.g. `python -m benchmarks.train_bench`; benchmarks/README.md lists them."""
