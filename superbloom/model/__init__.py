"""model/: the set Transformer: encoder, attention, input embeddings, batches and queries, warm starts, devices.

`superbloom.model` keeps the names of the module it was before the stage folders (encoder.py),
imported lazily."""
from .._lazy import lazy_exports

lazy_exports(globals(), {"ModelConfig": ".config", **{name: ".encoder" for name in (
    "Attention", "Block", "SetEncoder", "causal_keep", "SetModel", "count_parameters",
    "build_model",
)}})
