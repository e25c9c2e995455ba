"""inference/: a trained model answering: the one rank loop, the predictor, set expansion, fill-in-the-blank."""
