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
import importlib.resources
from pathlib import Path

__version__ = "0.2.0"  # the one version string (pyproject.toml reads it)

from .compare import compare  # noqa: E402
from .dataset import Dataset  # noqa: E402
from .decode import DecodeConfig  # noqa: E402
from .evaluate import EvalConfig, evaluate  # noqa: E402
from .expand import ExpandConfig, expand  # noqa: E402
from .hashing import BloomHash, HashConfig  # noqa: E402
from .heads import FullConfig, HierarchicalConfig, SampledConfig, SuperbloomConfig, head_config  # noqa: E402
from .model import ModelConfig  # noqa: E402
from .optim import OptimConfig  # noqa: E402
from .predictor import Prediction, Predictor, load  # noqa: E402
from .prepare import PrepareConfig, prepare  # noqa: E402
from .readers import InputError, ReadConfig  # noqa: E402
from .train import LoopConfig, TrainConfig, train  # noqa: E402


def embedded_dataset() -> Path:
    """The shipped default dataset: Wikispeedia's link list (West & Leskovec 2012; West et al. 2009)."""
    return Path(str(importlib.resources.files("superbloom") / "data" / "wikispeedia_links.tsv.gz"))


__all__ = ["BloomHash", "Dataset", "DecodeConfig", "EvalConfig", "ExpandConfig", "FullConfig", "HashConfig",
           "HierarchicalConfig", "InputError", "LoopConfig", "ModelConfig", "OptimConfig", "Prediction", "Predictor",
           "PrepareConfig", "ReadConfig", "SampledConfig", "SuperbloomConfig", "TrainConfig", "compare", "embedded_dataset",
           "evaluate", "expand", "head_config", "load", "prepare", "train"]
