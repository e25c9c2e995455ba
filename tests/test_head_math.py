"""The heads' mathematics, checked without a model: hierarchical A* top-k equals brute-force scoring
of every leaf (all three trees), the trees are valid and Huffman's is shortest, the sampled-softmax
loss tends to the full-softmax loss as the sample count reaches the vocabulary and its normaliser is
unbiased, and the full head's fused loss equals log_softmax by autograd. The heads built inside a model
are checked in test_heads.py."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.heads.hierarchical import TREES, astar_topk, balanced_tree, build_tree, fano_tree, huffman_tree, leaf_log_probs, path_nll, paths
from superbloom.heads.sampled import PROPOSALS, Proposal, proposal_probs, sampled_softmax_loss


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Toy tensors: a second intra-op thread only adds synchronisation, so this module runs
    single-threaded and restores the setting after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------ hierarchical


@settings(max_examples=80, deadline=None)
@given(n=st.integers(2, 300), kind=st.sampled_from(TREES), d=st.integers(1, 6), k=st.integers(1, 15),
       expand=st.sampled_from([1, 2, 5, None]), scale=st.floats(0.1, 6.0), n_exclude=st.integers(0, 5),
       seed=st.integers(0, 10_000))
def test_astar_topk_equals_brute_force(n, kind, d, k, expand, scale, n_exclude, seed):
    g = torch.Generator().manual_seed(seed)
    counts = np.random.default_rng(seed).zipf(1.6, n).clip(max=10 ** 6)
    tree = build_tree(kind, n, counts)
    t = {name: torch.from_numpy(getattr(tree, name)) for name in ("node_parent", "node_bit", "leaf_parent", "leaf_bit")}
    w, b = torch.randn(n - 1, d, generator=g) * scale, torch.randn(n - 1, generator=g) * scale
    v = torch.randn(3, d, generator=g)
    exclude = torch.randint(-1, n, (3, n_exclude), generator=g)
    brute = leaf_log_probs(v, w, b, t, tree.levels)  # (3, n) every leaf, scored on its own
    assert torch.allclose(brute.logsumexp(1), torch.zeros(3), atol=1e-4)  # a distribution over the ids
    ids, scores, expanded, certified = astar_topk(v, w, b, torch.from_numpy(tree.children), k, exclude, expand)
    assert bool(certified.all())  # without max_steps the search runs until every query is certified
    masked = brute.clone()
    for q in range(3):
        masked[q, exclude[q][exclude[q] >= 0]] = float("-inf")
    ref = masked.topk(min(k, n), dim=1).values
    ref = torch.cat([ref, torch.full((3, k - ref.shape[1]), float("-inf"))], 1)
    assert torch.allclose(scores, ref, atol=1e-4)  # -inf where fewer than k ids remain
    assert torch.equal(ids < 0, scores == float("-inf"))
    for q in range(3):  # every returned id carries its own brute-force score, and none is excluded
        got = ids[q][ids[q] >= 0]
        assert torch.allclose(brute[q, got], scores[q, : len(got)], atol=1e-4)
        assert len(set(got.tolist())) == len(got) and not set(got.tolist()) & set(exclude[q].tolist())
    assert (expanded <= n - 1).all()
    # the training loss of an id is minus its brute-force log-probability
    targets = torch.randint(0, n, (5,), generator=g)
    nodes, bits, valid = paths(targets, t["node_parent"], t["node_bit"], t["leaf_parent"], t["leaf_bit"],
                               int(tree.depth.max()))
    assert torch.equal(valid.sum(1), torch.from_numpy(tree.depth)[targets])
    nll = path_nll(v[:1].expand(5, d), w, b, nodes, bits, valid)
    assert torch.allclose(nll, -brute[0, targets], atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 500), seed=st.integers(0, 10_000), a=st.floats(1.05, 3.0))
def test_trees_are_valid_and_huffman_is_shortest(n, seed, a):
    counts = np.random.default_rng(seed).zipf(a, n).clip(max=10 ** 7)
    trees = {"balanced": balanced_tree(n), "huffman": huffman_tree(counts), "fano": fano_tree(counts)}
    for tree in trees.values():
        assert tree.children.shape == (n - 1, 2)
        leaves = np.sort(-tree.children[tree.children < 0] - 1)
        assert np.array_equal(leaves, np.arange(n))  # every id exactly once
        inner = np.sort(tree.children[tree.children >= 0])
        assert np.array_equal(inner, np.arange(1, n - 1))  # every internal node but the root once
        assert (2.0 ** -tree.depth.astype(float)).sum() == pytest.approx(1.0)  # Kraft: a full binary tree
    w = counts + 1
    assert trees["huffman"].mean_depth(w) <= trees["fano"].mean_depth(w) + 1e-9
    assert trees["huffman"].mean_depth(w) <= trees["balanced"].mean_depth(w) + 1e-9
    assert trees["balanced"].depth.max() == int(np.ceil(np.log2(n)))


def test_huffman_matches_a_hand_made_code():
    # weights (counts + 1) 45, 13, 12, 16, 9, 5: the textbook example, code lengths 1, 3, 3, 3, 4, 4
    tree = huffman_tree(np.array([44, 12, 11, 15, 8, 4]))
    assert tree.depth.tolist() == [1, 3, 3, 3, 4, 4]


# ------------------------------------------------------------------------------ sampled softmax


def _toy(seed=0, n=40, d=8, m=6):
    g = torch.Generator().manual_seed(seed)
    w, b, v = torch.randn(n, d, generator=g), torch.randn(n, generator=g), torch.randn(m, d, generator=g)
    return w, b, v, torch.randint(0, n, (m,), generator=g)


def _sampled(prop, s, w, b, v, t):
    neg = torch.unique(prop.sample(s))
    return sampled_softmax_loss(v, w[t], b[t], t, w[neg], b[neg], neg, prop.log_inclusion(neg, s))


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_sampled_loss_tends_to_full_loss(proposal):
    n = 40
    w, b, v, t = _toy(n=n)
    full = F.cross_entropy(v @ w.T + b, t).item()
    counts = (1000 // np.arange(1, n + 1)).astype(np.int64)
    prop = Proposal(proposal, n, counts)
    gaps = []
    for s in (n // 4, n, 4 * n, 64 * n):  # sample counts up to and past the vocabulary
        torch.manual_seed(0)
        gaps.append(np.mean([abs(_sampled(prop, s, w, b, v, t).item() - full) for _ in range(30)]))
    assert all(a > b for a, b in zip(gaps, gaps[1:])), gaps
    assert gaps[-1] < 1e-4, gaps  # every id drawn: the full softmax, with the target counted once


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_sampled_normaliser_is_unbiased(proposal):
    """The log-Q correction makes sum_{s in U} exp(o_s) / pi_s an unbiased estimate of the sum over
    every non-target id, even with few samples (where dropping the correction is far off)."""
    n = 40
    w, b, v, t = _toy(n=n, m=1)
    o = (v @ w.T + b)[0]
    want = (o.exp().sum() - o[t].exp()).item()
    prop = Proposal(proposal, n, (1000 // np.arange(1, n + 1)).astype(np.int64))
    torch.manual_seed(0)
    est = [(_sampled(prop, 8, w, b, v, t) + o[t]).exp().item() - o[t].exp().item() for _ in range(2000)]
    assert np.mean(est) == pytest.approx(want, rel=0.05)


@pytest.mark.parametrize("proposal", ["unigram", "log_uniform"])
def test_proposal_draws_follow_q(proposal):
    n = 50
    counts = (1000 // np.arange(1, n + 1)).astype(np.int64)
    prop = Proposal(proposal, n, counts)
    torch.manual_seed(0)
    freq = np.bincount(prop.sample(200_000).numpy(), minlength=n) / 200_000
    q = proposal_probs(proposal, n, counts)
    assert q.sum() == pytest.approx(1.0) and np.abs(freq - q).max() < 0.005


# ------------------------------------------------------------------------------ the fused full softmax


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 12), n=st.integers(2, 40), d=st.integers(1, 8), scale=st.floats(0.1, 30.0),
       seed=st.integers(0, 10_000))
def test_fused_full_softmax_nll_equals_log_softmax(m, n, d, scale, seed):
    """The full head's fused training loss (one logits buffer, hand-written backward): the same loss
    and the same gradients for v, W and b as -log_softmax(v W^T + b)[t] by autograd."""
    from superbloom.heads.full import fused_softmax_nll
    g = torch.Generator().manual_seed(seed)
    v0, w0, b0 = (torch.randn(s, generator=g, dtype=torch.float64) * scale for s in ((m, d), (n, d), (n,)))
    t = torch.randint(0, n, (m,), generator=g)
    got_in = [x.clone().requires_grad_() for x in (v0, w0, b0)]
    want_in = [x.clone().requires_grad_() for x in (v0, w0, b0)]
    got = fused_softmax_nll(*got_in, t)
    want = -F.log_softmax(want_in[0] @ want_in[1].T + want_in[2], -1)[torch.arange(m), t].mean()
    (3.0 * got).backward()
    (3.0 * want).backward()
    assert torch.allclose(got, want)
    for a, b in zip(got_in, want_in):
        assert torch.allclose(a.grad, b.grad)
