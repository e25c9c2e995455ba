"""superbloom: Bloom-filter hashing of opaque ids + a set Transformer, trained with a masked full
softmax over the hashed vocabulary, decoded by beam search with an exactness certificate
(Superbloom: Bloom filter meets Transformer, Anderson et al.).

    import superbloom as sb
    sb.prepare(sb.PrepareConfig("links.tsv", "data/wiki"))
    sb.train(sb.TrainConfig(data="data/wiki", out="runs/wiki", loop=sb.LoopConfig(time_budget=600)))
    model = sb.load("runs/wiki")
    model.predict(["Miles_Davis", "Jazz"], k=10)
    sb.expand(model, ["Copenhagen"], sb.ExpandConfig(steps=5))   # set expansion
    sb.evaluate(model, sb.Dataset("data/wiki"))
    sb.compare(model, {"other": sb.load("runs/other")}, sb.Dataset("data/wiki"))   # paired differences
"""
from ._lazy import lazy_exports
from ._version import __version__  # noqa: F401 (the one version string)

# public name -> the module that defines it, imported on first use (PEP 562): `import superbloom`
# imports neither torch nor scipy nor pyarrow, so the command line starts fast
_EXPORTS = {
    "compare": ".evaluation.compare",
    "Dataset": ".data.dataset",
    "DecodeConfig": ".heads.decode_config",
    "EvalConfig": ".evaluation.evaluate", "evaluate": ".evaluation.evaluate",
    "ExpandConfig": ".inference.expand", "expand": ".inference.expand",
    "BloomHash": ".hashing.bloom", "HashConfig": ".hashing.bloom",
    "FullConfig": ".heads.registry", "HierarchicalConfig": ".heads.registry", "SampledConfig": ".heads.registry",
    "SuperbloomConfig": ".heads.registry", "head_config": ".heads.registry",
    "ModelConfig": ".model.encoder",
    "OptimConfig": ".training.optim",
    "Prediction": ".inference.predictor", "Predictor": ".inference.predictor", "load": ".inference.predictor",
    "PrepareConfig": ".data.prepare", "prepare": ".data.prepare",
    "InputError": ".data.readers", "ReadConfig": ".data.readers",
    "LoopConfig": ".training.train", "TrainConfig": ".training.train", "train": ".training.train",
    "embedded_dataset": ".data.embedded",
}
lazy_exports(globals(), _EXPORTS)

__all__ = ["BloomHash", "Dataset", "DecodeConfig", "EvalConfig", "ExpandConfig", "FullConfig", "HashConfig",
           "HierarchicalConfig", "InputError", "LoopConfig", "ModelConfig", "OptimConfig", "Prediction", "Predictor",
           "PrepareConfig", "ReadConfig", "SampledConfig", "SuperbloomConfig", "TrainConfig", "compare", "embedded_dataset",
           "evaluate", "expand", "head_config", "load", "prepare", "train"]
