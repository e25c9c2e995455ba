"""training/: the loop, the run skeleton, the objectives registry, train(cfg), optimizers (AdamW, AdapSGD)."""
