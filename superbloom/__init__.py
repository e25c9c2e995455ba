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
import importlib
import importlib.resources
import sys
import types
from pathlib import Path

__version__ = "0.2.0"  # the one version string (pyproject.toml reads it)

# public name -> the module that defines it, imported on first use (PEP 562): `import superbloom`
# imports neither torch nor scipy nor pyarrow, so the command line starts fast
_EXPORTS = {
    "compare": ".compare",
    "Dataset": ".dataset",
    "DecodeConfig": ".decode_config",
    "EvalConfig": ".evaluate", "evaluate": ".evaluate",
    "ExpandConfig": ".expand", "expand": ".expand",
    "BloomHash": ".hashing", "HashConfig": ".hashing",
    "FullConfig": ".heads", "HierarchicalConfig": ".heads", "SampledConfig": ".heads", "SuperbloomConfig": ".heads",
    "head_config": ".heads",
    "ModelConfig": ".model",
    "OptimConfig": ".optim",
    "Prediction": ".predictor", "Predictor": ".predictor", "load": ".predictor",
    "PrepareConfig": ".prepare", "prepare": ".prepare",
    "InputError": ".readers", "ReadConfig": ".readers",
    "LoopConfig": ".train", "TrainConfig": ".train", "train": ".train",
}


def __getattr__(name: str):
    """The public names, each imported from its module on first use (then cached in this module)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module type: importing the submodule `superbloom.evaluate` (or compare, expand,
    prepare, train) must not replace the public function of the same name, as the import system would
    by setting the package's attribute to the submodule (the eager imports this replaced kept the function)."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == "." + name:
            return  # `sb.evaluate` stays (or becomes, on first use) the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def embedded_dataset() -> Path:
    """The shipped default dataset: Wikispeedia's link list (West & Leskovec 2012; West et al. 2009)."""
    return Path(str(importlib.resources.files("superbloom") / "data" / "wikispeedia_links.tsv.gz"))


__all__ = ["BloomHash", "Dataset", "DecodeConfig", "EvalConfig", "ExpandConfig", "FullConfig", "HashConfig",
           "HierarchicalConfig", "InputError", "LoopConfig", "ModelConfig", "OptimConfig", "Prediction", "Predictor",
           "PrepareConfig", "ReadConfig", "SampledConfig", "SuperbloomConfig", "TrainConfig", "compare", "embedded_dataset",
           "evaluate", "expand", "head_config", "load", "prepare", "train"]
