"""hashing/: ids -> m Bloom tokens (paper sec. 3.2): hash maps, coherent maps (appendix D), new ids into buckets.

`superbloom.hashing` keeps the names of the module it was before the stage folders (bloom.py),
imported lazily; the settings come from config.py (no torch)."""
from .._lazy import lazy_exports

_CONFIG = ("UNHASHED_MAX_IDS", "AUTO_ALPHA", "HashConfig")
lazy_exports(globals(), {**{name: ".config" for name in _CONFIG}, **{name: ".bloom" for name in (
    "SPECIALS", "PAD", "MASK", "UNK", "CLS", "SEP", "PAD_ELEM", "MASK_ELEM",
    "BloomHash", "bucket_sizes", "inverse_index", "key_weights", "mix_keys", "duplicate_rows",
    "separate_collisions",
)}})
