"""evaluation/: metrics, protocols (sets, leave-one-out, text), baselines, evaluate -> EvalResult, compare."""
