"""superbloom: Bloom-filter hashing of opaque ids + a set Transformer, trained with a masked full
softmax over the hashed vocabulary, decoded by beam search with an exactness certificate
(Superbloom: Bloom filter meets Transformer, Anderson et al.).

    import superbloom as sb
    sb.prepare(sb.PrepareConfig("links.tsv", "data/wiki"))
    sb.train(sb.TrainConfig(data="data/wiki", out="runs/wiki", time_budget=600))
    model = sb.load("runs/wiki")
    model.predict(["Miles_Davis", "Jazz"], k=10)
    sb.expand(model, ["Copenhagen"], sb.ExpandConfig(steps=5))   # set expansion
    sb.evaluate(model, sb.Dataset("data/wiki"))
"""
import importlib.resources
from pathlib import Path

from .dataset import Dataset
from .decode import DecodeConfig
from .evaluate import EvalConfig, evaluate
from .expand import ExpandConfig, expand
from .hashing import BloomHash, HashConfig
from .heads import HeadConfig
from .model import ModelConfig
from .predictor import Prediction, Predictor, load
from .prepare import PrepareConfig, prepare
from .readers import InputError, ReadConfig
from .train import TrainConfig, train

__version__ = "0.1.0"


def embedded_dataset() -> Path:
    """The shipped default dataset: Wikispeedia's link list (West & Leskovec 2012; West et al. 2009)."""
    return Path(str(importlib.resources.files("superbloom") / "data" / "wikispeedia_links.tsv.gz"))


__all__ = ["BloomHash", "Dataset", "DecodeConfig", "EvalConfig", "ExpandConfig", "HashConfig", "HeadConfig",
           "InputError", "ModelConfig", "Prediction", "Predictor", "PrepareConfig", "ReadConfig", "TrainConfig",
           "embedded_dataset", "evaluate", "expand", "load", "prepare", "train"]
