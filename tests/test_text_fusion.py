"""benchmarks/text/fusion_bench.py: the exhaustive network ranks equal Algorithm 1's exact ranks, and the
fusion is the network at beta -> 0 and orders the term's ids first at a large beta."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.evaluation.metrics import target_ranks
from superbloom.evaluation.text_protocol import BigramContext, TextMasking, neighbours
from superbloom.heads.decode_config import DecodeConfig
from superbloom.inference.rank import rank_masked

from test_text_mlm import TINY, text_data  # noqa: F401  (the module's corpus fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "text"))
import fusion_bench as fb  # noqa: E402


@pytest.fixture(scope="module")
def fusion_setup(text_data, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("fusionmodel") / "model"
    assert main(["train", "--preset", "none", str(text_data), "--out", str(out), "--objective", "text-mlm",
                 "--alpha", "4", "--m", "2", "--steps", "30", "--eval-every", "0", "--segment", "32", *TINY]) == 0
    data = sb.Dataset(text_data)
    p = sb.load(out, threads=1, device="cpu")
    ex = TextMasking(n=32, max_sets=20, seed=0).examples(data)
    return data, p, ex


def test_exhaustive_network_ranks_equal_the_exact_decoder(fusion_setup):
    data, p, ex = fusion_setup
    _, _, targets = ex.flat()
    term = BigramContext(data.train, np.asarray(data.counts))
    net, _ = fb.fused_ranks(p.model, p.hashing, ex, term, [])
    exact = rank_masked(p.model, p.hashing, ex, fb.DEPTH, DecodeConfig(exact=True))
    assert len(targets) > 20
    np.testing.assert_array_equal(net, target_ranks(exact.ids.numpy(), targets))


def test_fusion_is_the_network_at_small_beta_and_the_term_first_at_large_beta(fusion_setup):
    data, p, ex = fusion_setup
    _, _, targets = ex.flat()
    term = BigramContext(data.train, np.asarray(data.counts))
    net, hyb = fb.fused_ranks(p.model, p.hashing, ex, term, [(1e-9, 1e-3), (1e6, 1e-3)])
    np.testing.assert_array_equal(hyb[(1e-9, 1e-3)], net)
    # at a huge beta the term decides: the target is first exactly when it is the term's unique best id
    left, right = neighbours(ex)
    n = data.n_ids
    dense = np.stack([(term.after[a].toarray().ravel() if a >= 0 else np.zeros(n))
                      + (term.before[b].toarray().ravel() if b >= 0 else np.zeros(n)) for a, b in zip(left, right)])
    best = dense.max(1)
    unique_best = (dense == best[:, None]).sum(1) == 1
    is_best = dense[np.arange(len(targets)), targets] == best
    big = hyb[(1e6, 1e-3)]
    sel = unique_best & (best > 0)
    assert sel.sum() > 5
    np.testing.assert_array_equal(big[sel] == 1, is_best[sel])
    assert np.all(big[~is_best & (best > 0)] != 1)
