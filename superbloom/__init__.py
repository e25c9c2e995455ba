"""superbloom: Bloom-filter hashing of opaque ids + a set Transformer, trained with a masked full
softmax over the hashed vocabulary, decoded by beam search with an exactness certificate
(Superbloom: Bloom filter meets Transformer, Anderson et al.).

    import superbloom as sb
    sb.prepare(sb.PrepareConfig("links.tsv", "data/wiki"))
    sb.train(sb.TrainConfig(data="data/wiki", out="runs/wiki", loop=sb.LoopConfig(time_budget=600)))
    model = sb.load("runs/wiki")                  # any model directory: the object for its kind
    model.predict(["Miles_Davis", "Jazz"], k=10)
    model.info()                                  # kind, parameters, checkpoint, ...
    sb.set_threads(1)                             # torch's CPU threads: the one process-wide setting
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
    "EvalConfig": ".evaluation.config", "evaluate": ".evaluation.evaluate",
    "ExpandConfig": ".inference.expand", "expand": ".inference.expand",
    "BloomHash": ".hashing.bloom", "HashConfig": ".hashing.config",
    "FullConfig": ".heads.config", "HierarchicalConfig": ".heads.config", "SampledConfig": ".heads.config",
    "SuperbloomConfig": ".heads.config", "head_config": ".heads.config",
    "ModelConfig": ".model.config", "set_threads": ".model.device",
    "OptimConfig": ".training.config",
    "Prediction": ".inference.predictor", "Predictor": ".inference.predictor",
    "PrepareConfig": ".data.prepare", "prepare": ".data.prepare",
    "InputError": ".data.readers", "ReadConfig": ".data.readers",
    "LoopConfig": ".training.config", "TrainConfig": ".training.config", "train": ".training.train",
    "embedded_dataset": ".data.embedded",
    "Ensemble": ".inference.ensemble",
    "ArgumentError": "._bounds",
    "fit": ".fitting", "Recommendations": ".inference.recommend",
}
lazy_exports(globals(), _EXPORTS)


def load(model_dir, device: str = "auto", mmap: bool = True, part: str = "whole"):
    """The model in a trained directory, as the object for its kind (config.json's "kind", or read
    from an older directory's sections: storage/kinds.py), each with info():

        set-model, sequence-model, text-model  Predictor: predict(ids, k), similar(id, k), recommend(...)
        ensemble                               Ensemble (a Predictor): its members ranked as one
                                               (a text model's blanks: inference.fill.Filler.from_predictor)
        set-embedding                          setembed.Embedder: similar(ids, k), classify(ids), embed_many(...)
        text-classifier                        textclass.classifier.Classifier: predict(text, k)

    device and mmap as the kind's loader takes them (loading changes no process-wide setting: torch's
    threads are set_threads'). part: what an id model ranks by, "whole", or a
    hybrid's "network" or "term" alone (inference/parts.py). A bad argument is an ArgumentError naming it."""
    from . import _bounds as check
    from .inference.parts import PARTS
    from .storage.kinds import read_kind

    model_dir = check.path("model_dir", model_dir)
    device = check.device("device", device)
    check.flag("mmap", mmap)
    check.one_of("part", part, PARTS)
    from .storage.loading import read_whole

    def read():  # one version of the folder, read again if another run swaps a new one in meanwhile
        name = read_kind(model_dir).name
        return name, _LOADERS[name](model_dir, device, mmap)
    kind, model = read_whole(model_dir, read)
    if part == "whole":
        return model
    from .inference.parts import rank_by
    from .inference.predictor import Predictor

    if not isinstance(model, Predictor):
        raise check.ArgumentError("part", f"{part!r}: a {kind} has no parts; a set or sequence model with a hybrid "
                                          "head, or an ensemble with a term, has")
    return rank_by(model, part)


def _predictor(model_dir, device, mmap):
    from .inference.loader import load_model  # Predictor.load, read again if a running training moves BEST mid-read

    return load_model(model_dir, device, mmap)


def _ensemble(model_dir, device, mmap):
    from .inference.ensemble import Ensemble

    return Ensemble.load_dir(model_dir, device, mmap)


def _embedder(model_dir, device, mmap):
    from .setembed.embedder import Embedder

    return Embedder.load(model_dir, device)


def _classifier(model_dir, device, mmap):
    from .textclass.classifier import Classifier

    return Classifier.load(model_dir)  # a small CPU model: read into memory


# model kind (storage/kinds.py: KINDS) -> its loader (tests/test_load.py checks every kind has one)
_LOADERS = {"set-model": _predictor, "sequence-model": _predictor, "text-model": _predictor, "ensemble": _ensemble,
            "set-embedding": _embedder, "text-classifier": _classifier}

__all__ = ["ArgumentError", "BloomHash", "Dataset", "DecodeConfig", "Ensemble", "EvalConfig", "ExpandConfig",
           "FullConfig", "HashConfig", "HierarchicalConfig", "InputError", "LoopConfig", "ModelConfig",
           "OptimConfig", "Prediction", "Predictor", "PrepareConfig", "ReadConfig", "Recommendations",
           "SampledConfig", "SuperbloomConfig", "TrainConfig", "compare", "embedded_dataset", "evaluate", "expand",
           "fit", "head_config", "load", "prepare", "set_threads", "train"]
