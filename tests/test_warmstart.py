"""warmstart.py: a new run's token embedding from co-occurrence factors (issue 16)."""
import json

import numpy as np
import pytest
import torch
import torch.nn as nn

from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.model.warmstart import cooccurrence_init, initialise

# two topics: ids 0-4 always together, ids 5-9 always together; id 10 alone; id 11 in no training set
SETS = SetArray.from_lists([[0, 1, 2, 3, 4]] * 6 + [[5, 6, 7, 8, 9]] * 6 + [[0, 2, 4], [5, 7, 9], [10]])
N = 12


def _cos(w, a, b):
    return float(torch.nn.functional.cosine_similarity(w[a], w[b], dim=0))


@pytest.mark.parametrize("alpha,m", [(1, 1), (2, 2)])
def test_cooccurring_ids_start_close(alpha, m):
    h = BloomHash.build(N, HashConfig(alpha=alpha, m=m))
    emb = nn.Embedding(h.n_tokens, 8)
    nn.init.normal_(emb.weight, std=0.02)
    before = emb.weight.detach().clone()
    summary = cooccurrence_init(emb, h, SETS, N)
    w = emb.weight.detach()
    special = torch.arange(h.n_special_tokens)
    assert torch.equal(w[special], before[special])  # special tokens keep their random rows
    if alpha == 1:
        tok = h.tokens(np.arange(N))[:, 0]
        assert _cos(w, tok[0], tok[3]) > 0.9 and _cos(w, tok[5], tok[8]) > 0.9
        assert abs(_cos(w, tok[0], tok[5])) < 0.2
        assert abs(_cos(w, tok[10], tok[0])) < 0.2 and abs(_cos(w, tok[10], tok[5])) < 0.2  # its own direction
        assert torch.equal(w[tok[11]], before[tok[11]])  # absent from training: random row kept
        assert summary["tokens_set"] == 11
    # rows keep the random rows' scale
    changed = (w != before).any(1)
    assert torch.allclose(w[changed].norm(dim=1), before.norm(dim=1).mean().expand(int(changed.sum())), rtol=1e-4)


def test_unknown_init_is_refused():
    h = BloomHash.build(N, HashConfig(alpha=1, m=1))
    with pytest.raises(ValueError, match="unknown init 'svd'"):
        initialise("svd", nn.Module(), h, SETS, N, 0)


def test_train_records_the_init(tmp_path):
    import superbloom as sb
    from superbloom.model.encoder import ModelConfig
    from superbloom.data.prepare import PrepareConfig, prepare
    from superbloom.data.readers import ReadConfig

    prepare(PrepareConfig(input=str(sb.embedded_dataset()), out=str(tmp_path / "data"),
                          read=ReadConfig(format="edges")), progress=False)
    cfg = sb.TrainConfig(data=str(tmp_path / "data"), out=str(tmp_path / "model"), init="cooccurrence",
                         hash=sb.HashConfig(alpha=1, m=1), model=ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         loop=sb.LoopConfig(steps=2, batch_size=16, eval_every=0))
    sb.train(cfg, progress=False)
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    assert saved["train"]["init"] == "cooccurrence" and saved["init"]["tokens_set"] > 4000
