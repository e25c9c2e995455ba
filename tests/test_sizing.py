"""superbloom/sizing.py: the parameter count of a configuration without training, and the width
matched to a parameter budget (models of equal size, the paper's Tables 2 and 3)."""
from __future__ import annotations

import numpy as np
import pytest

import superbloom as sb
from superbloom.hashing.bloom import BloomHash
from superbloom.model.encoder import build_model, count_parameters
from superbloom.model.sizing import count_params, matched_width, model_config

N = 300
COUNTS = np.arange(N, 0, -1, dtype=np.int64)  # (N,) training counts (the hierarchical head's tree needs them)


def test_model_config_shape():
    cfg = model_config(48, 3)
    assert (cfg.d, cfg.heads, cfg.d_ff, cfg.layers, cfg.dropout) == (48, 4, 192, 3, 0.1)
    assert model_config(8, 1, heads=2, d_ff=10).d_ff == 10


@pytest.mark.parametrize("head", [sb.SuperbloomConfig(), sb.FullConfig(), sb.HierarchicalConfig()],
                         ids=lambda h: h.name)
def test_count_params_equals_the_built_model(head):
    hash_cfg = sb.HashConfig(1, 1) if head.name != "superbloom" else sb.HashConfig(4, 2)
    model = model_config(16, 1)
    built = build_model(model, head, BloomHash.build(N, hash_cfg), COUNTS)
    assert count_params(N, COUNTS, hash_cfg, model, head) == count_parameters(built)


def test_count_params_grows_with_width_and_shrinks_with_hashing():
    plain, hashed = sb.HashConfig(1, 1), sb.HashConfig(10, 2)
    head = sb.SuperbloomConfig()
    assert count_params(N, COUNTS, plain, model_config(8, 1), head) < count_params(N, COUNTS, plain, model_config(16, 1), head)
    assert count_params(N, COUNTS, hashed, model_config(16, 1), head) < count_params(N, COUNTS, plain, model_config(16, 1), head)


def test_matched_width_is_the_closest_width_up_to_the_first_one_above():
    plain, head = sb.HashConfig(1, 1), sb.FullConfig()
    widths = (4, 8, 12, 16, 24, 32)
    counts = {d: count_params(N, COUNTS, plain, model_config(d, 1, heads=4 if d % 4 == 0 else 2), head) for d in widths}
    target = (counts[12] + counts[16]) // 2 + 1  # nearer 16
    cfg, p = matched_width(N, COUNTS, target, plain, 1, head, widths=widths)
    assert (cfg.d, p) == (16, counts[16])
    cfg, p = matched_width(N, COUNTS, counts[8], plain, 1, head, widths=widths)  # an exact match
    assert (cfg.d, p) == (8, counts[8])
    cfg, _ = matched_width(N, COUNTS, 10 ** 12, plain, 1, head, widths=widths)  # beyond every width: the widest
    assert cfg.d == 32
    cfg, _ = matched_width(N, COUNTS, 1, plain, 1, head, widths=(6, 8))  # d = 6: 2 attention heads
    assert (cfg.d, cfg.heads) == (6, 2)
