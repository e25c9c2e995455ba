"""Output heads. First one contract table (thinc-style) that runs every head through the same
checks: it builds, its loss is finite, gradients reach every parameter, its loss agrees with the
scores its top-k gives, top-k has the right shape and order and never returns excluded ids, eval
mode is deterministic, weights survive a save/load. Then each head's own properties inside a model:
the sampled head trains on samples and evaluates on the full softmax, top-k in chunks equals top-k
at once, hierarchical A* falls back to exhaustive scoring exactly, the full head's fused loss path.
The heads' mathematics without a model (A*, trees, sampled softmax, the fused loss): test_head_math.py."""
import json
from typing import Callable, NamedTuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_model

from superbloom.model.batches import MaskConfig, query_batch, training_batch
from superbloom.storage.checkpoint import load_weights
from superbloom.data.dataset import SetArray
from superbloom.heads.beam import DecodeConfig
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import HEADS, build_head, head_config, head_config_dict, head_config_from_dict
from superbloom.model.encoder import ModelConfig, build_model, count_parameters

from conftest import DEVICES



@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Toy tensors: a second intra-op thread only adds synchronisation (and stalls badly when the
    cores are shared), so this module runs single-threaded and restores the setting after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


N_IDS = 120
COUNTS = (1000 // np.arange(1, N_IDS + 1)).astype(np.int64)  # Zipf-like training counts

TRAIN_SETS = SetArray.from_lists([np.random.default_rng(s).choice(N_IDS, 6, replace=False) for s in range(60)])


class Case(NamedTuple):
    """One row of the contract table: a head config, its hashing (alpha, m), what the row does to a
    built and fitted head (`setup`), and whether topk's scores are the log-probabilities the loss
    is minus (a head that adds a term to them at evaluation is not)."""
    cfg: object
    hashing: tuple[int, int]
    setup: Callable | None = None
    log_probs: bool = True


def mixed(mix: float) -> Callable:
    return lambda head: head.mix.fill_(mix)  # the hybrid's item-item weight, as a validation would set it


# every head, hashed and unhashed, and the variants of each
CASES = {
    "superbloom": Case(head_config("superbloom"), (4, 2)),
    "superbloom-per-hash": Case(head_config("superbloom", per_hash_softmax=True), (4, 2)),
    "superbloom-unhashed": Case(head_config("superbloom"), (1, 1)),
    "full-tied": Case(head_config("full"), (1, 1)),
    "full-hashed-input": Case(head_config("full", label_smoothing=0.1), (4, 2)),
    "sampled-log-uniform": Case(head_config("sampled", samples=32), (1, 1)),
    "sampled-unigram-hashed": Case(head_config("sampled", samples=32, proposal="unigram"), (4, 2)),
    "sampled-uniform": Case(head_config("sampled", samples=32, proposal="uniform"), (1, 1)),
    "hierarchical-huffman": Case(head_config("hierarchical"), (1, 1)),
    "hierarchical-balanced-hashed": Case(head_config("hierarchical", tree="balanced"), (4, 2)),
    "hierarchical-fano": Case(head_config("hierarchical", tree="fano"), (1, 1)),
    # the hybrid needs identity hashing and its fitted item-item term; at mix 0 it is the full softmax
    "hybrid": Case(head_config("hybrid", neighbours=8), (1, 1)),
    "hybrid-mixed-cosine": Case(head_config("hybrid", neighbours=8, term="cooccurrence", samples=16), (1, 1),
                                mixed(3.0), log_probs=False),
    # the hashed hybrid: the superbloom head (any hashing) + the same kind of term, exact merge
    "hashed-hybrid": Case(head_config("hashed-hybrid", neighbours=8), (4, 2)),
    "hashed-hybrid-mixed-unhashed": Case(head_config("hashed-hybrid", neighbours=8, term="cooccurrence"), (1, 1),
                                         mixed(3.0), log_probs=False),
}


def test_every_registered_head_is_in_the_table():
    assert {case.cfg.name for case in CASES.values()} == set(HEADS)


def make(case, seed=0, device="cpu", fit=True):
    """The row's model: built, its head fitted on TRAIN_SETS (heads/base.py: fit; a no-op for most
    heads) and set up by the row. fit=False: as Predictor.load builds it, before the weights."""
    row = CASES[case]
    h = BloomHash.build(N_IDS, HashConfig(*row.hashing, 0))
    torch.manual_seed(seed)
    model_cfg = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.1)
    model = build_model(model_cfg, row.cfg, h, COUNTS)
    if fit:
        built = model.head.fit(TRAIN_SETS)
        assert built is None or json.loads(json.dumps(built)) == built  # recorded in config.json
        if row.setup is not None:
            row.setup(model.head)
    return h, model.to(device)


def batch(h, seed=0, device="cpu"):
    rng = np.random.default_rng(seed)
    sets = SetArray.from_lists([rng.choice(N_IDS, 12, replace=False) for _ in range(6)])
    return training_batch(sets, np.arange(6), h, MaskConfig(mask_rate=0.3), rng).to(device)


CONTEXTS = np.array([[0, 5, 17, -1], [3, -1, -1, -1], [1, 2, 3, 4], [60, 61, 119, 0]])


def queries(h, model, device="cpu"):
    """-> hidden (Q, m, d) of the CONTEXTS queries, their ids (Q, 4): the exclusion and the context."""
    return (model.target_hidden(query_batch(CONTEXTS, h).to(device)), torch.from_numpy(CONTEXTS).to(device))


def is_exact(case):
    return CASES[case].cfg.name not in ("superbloom", "hashed-hybrid")  # the hashed heads: m distributions


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_builds_and_loss_is_finite(case, device):
    h, model = make(case, device=device)
    loss = model.train()(batch(h, device=device))
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0 and loss.device.type == device


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_gradients_reach_every_parameter(case, device):
    h, model = make(case, device=device)
    model.train()(batch(h, device=device)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("case", CASES)
def test_loss_is_minus_log_of_the_topk_score(case):
    """What training minimises is what decoding ranks by: in eval mode the loss of target t is
    -score(t) in the exhaustive ranking (superbloom: -sum_j log p_j, the sum_log score)."""
    h, model = make(case)
    model.eval()
    if not CASES[case].log_probs:
        pytest.skip("this row's topk adds a term to the log-probabilities (the hybrid at mix > 0)")
    hidden, context = queries(h, model)
    full = model.head.topk(hidden, N_IDS, decode=DecodeConfig(exhaustive=True), context=context)
    for q, t in [(0, 0), (1, 7), (2, 119), (3, 42)]:
        score = full.scores[q, full.ids[q].tolist().index(t)]
        if getattr(CASES[case].cfg, "label_smoothing", 0.0):
            continue  # smoothing adds a term to the loss on purpose
        assert model.head.loss(hidden[q:q + 1], torch.tensor([t])).item() == pytest.approx(-score.item(), abs=1e-4)
    if is_exact(case):  # one normalised distribution over the ids
        assert torch.allclose(full.scores.logsumexp(1), torch.zeros(len(CONTEXTS)), atol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_targets_can_share_hidden_rows(case):
    """loss(hidden, targets, rows): targets of one (merged) element share its hidden row."""
    h, model = make(case)
    model.eval()
    hidden = torch.randn(3, CASES[case].hashing[1], 16)
    targets, rows = torch.tensor([4, 9, 9, 100, 0]), torch.tensor([0, 0, 2, 2, 1])
    assert torch.allclose(model.head.loss(hidden, targets, rows), model.head.loss(hidden[rows], targets), atol=1e-6)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("decode", [DecodeConfig(), DecodeConfig(exact=True), DecodeConfig(beam=3, score="min"),
                                    DecodeConfig(exhaustive=True, score="max")], ids=["default", "exact", "min", "exh"])
@pytest.mark.parametrize("device", DEVICES)
def test_topk_shape_order_and_exclusion(case, decode, device):
    h, model = make(case, device=device)
    model.eval()
    hidden, exclude = queries(h, model, device)
    k = 9
    r = model.head.topk(hidden, k, exclude=exclude, decode=decode, context=exclude).cpu()
    exclude = exclude.cpu()
    assert r.ids.shape == r.scores.shape == (len(CONTEXTS), k) and r.exact.shape == r.beam.shape == (len(CONTEXTS),)
    assert r.ids.dtype == torch.long and r.exact.dtype == torch.bool
    assert (r.scores[:, 1:] <= r.scores[:, :-1]).all()  # best first
    assert ((r.ids >= 0) & (r.ids < N_IDS)).all()  # 120 ids: always k to rank
    for q in range(len(CONTEXTS)):
        assert len(set(r.ids[q].tolist())) == k
        assert not set(r.ids[q].tolist()) & set(CONTEXTS[q].tolist())
    if is_exact(case) or decode.exact or decode.exhaustive:
        assert r.exact.all()


@pytest.mark.parametrize("case", CASES)
def test_fast_topk_equals_exhaustive(case):
    h, model = make(case)
    model.eval()
    hidden, exclude = queries(h, model)
    fast = model.head.topk(hidden, 10, exclude, DecodeConfig(exact=True), context=exclude)
    ref = model.head.topk(hidden, 10, exclude, DecodeConfig(exhaustive=True), context=exclude)
    assert fast.exact.all() and torch.allclose(fast.scores, ref.scores, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_user_supplied_gamma_maps_scores(case):
    if not CASES[case].log_probs and CASES[case].cfg.name == "hashed-hybrid":
        pytest.skip("the hashed hybrid adds its term after gamma: gamma(network) + mix x term")
    h, model = make(case)
    model.eval()
    hidden, exclude = queries(h, model)
    plain = model.head.topk(hidden, 5, exclude, DecodeConfig(exact=True), context=exclude)
    doubled = model.head.topk(hidden, 5, exclude, DecodeConfig(exact=True, score=lambda lp: 2 * lp.sum(-1)),
                              context=exclude)
    assert torch.allclose(doubled.scores, 2 * plain.scores, atol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_eval_mode_is_deterministic(case):
    h, model = make(case)
    model.eval()
    b = batch(h)
    assert torch.equal(model(b), model(b))
    hidden, exclude = queries(h, model)
    a, c = (model.head.topk(hidden, 6, exclude, context=exclude) for _ in range(2))
    assert torch.equal(a.ids, c.ids) and torch.equal(a.scores, c.scores)


@pytest.mark.parametrize("case", CASES)
def test_weights_survive_save_and_load(case, tmp_path):
    h, model = make(case, seed=0)
    model.train()(batch(h)).backward()  # make sure the weights are not at their init
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    save_model(model, str(tmp_path / "model.safetensors"))
    _, fresh = make(case, seed=1, fit=False)  # as Predictor.load builds it (the hybrid: an empty term)
    load_weights(fresh, tmp_path)
    model.eval(), fresh.eval()
    hidden, exclude = queries(h, model)
    a, b = (m.head.topk(hidden, 6, exclude, context=exclude) for m in (model, fresh))
    assert torch.equal(a.ids, b.ids) and torch.allclose(a.scores, b.scores)


@pytest.mark.parametrize("case", CASES)
def test_the_hooks_generic_code_calls(case):
    """heads/base.py's hooks on every head: describe names it (JSON), its fixed weights are counted
    with the parameters, a head that does not use the context ranks the same without it, each
    variant ranks inside its block and leaves the head ranking as before, and after choose the head
    ranks as the candidate whose metrics choose returned."""
    from superbloom.evaluation.metrics import summarize, target_ranks
    h, model = make(case)
    model.eval()
    head = model.head
    hidden, context = queries(h, model)
    assert head.describe()["name"] == CASES[case].cfg.name
    assert json.loads(json.dumps(head.describe())) == head.describe()
    assert count_parameters(model) == sum(p.numel() for p in model.parameters()) + head.fixed_weights()

    def rank():
        return head.topk(hidden, 10, exclude=context, context=context)

    def same(a, b):
        return torch.equal(a.ids, b.ids) and torch.equal(a.scores, b.scores)
    before = rank()
    if not head.uses_context:
        assert same(head.topk(hidden, 10, exclude=context), before)
    for variant in head.variants().values():
        with variant:
            assert rank().ids.shape == before.ids.shape
        assert same(rank(), before)
    targets = np.array([5, 7, 119, 1])

    def metrics(ranking) -> dict:
        return summarize(target_ranks(ranking.ids.numpy(), targets))
    chosen = head.choose(rank, metrics, "mrr", (1.0, 0.5))
    assert chosen.scores["mrr"] == metrics(rank())["mrr"]


def test_full_head_ties_its_output_to_the_input_embedding_only_without_hashing():
    _, tied = make("full-tied")
    assert tied.head.tied and tied.head.rows().data_ptr() != 0
    assert not any(n.startswith("head.weight") for n, _ in tied.named_parameters())
    ids = torch.tensor([0, 5, 119])
    h = BloomHash.build(N_IDS, HashConfig(1, 1, 0))
    assert torch.equal(tied.head.rows(ids), tied.encoder.embed.weight[torch.from_numpy(h.tokens(ids.numpy())[:, 0])])
    _, own = make("full-hashed-input")
    assert not own.head.tied and own.head.weight.shape == (N_IDS, 16)


def test_configuration_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match="proposal must be one of"):
        head_config("sampled", proposal="zipf")
    with pytest.raises(ValueError, match="tree must be one of"):
        head_config("hierarchical", tree="random")
    with pytest.raises(ValueError, match="samples must be >= 1"):
        head_config("sampled", samples=0)
    h = BloomHash.build(N_IDS, HashConfig(1, 1, 0))
    emb = torch.nn.Embedding(h.n_tokens, 8)
    with pytest.raises(ValueError, match="unknown head 'softmax'"):
        head_config("softmax")
    with pytest.raises(ValueError, match="huffman tree is built from training counts"):
        build_head(head_config("hierarchical"), emb, h)
    with pytest.raises(ValueError, match="unigram proposal is built from training counts"):
        build_head(head_config("sampled", proposal="unigram"), emb, h)
    with pytest.raises(ValueError, match="per_hash_softmax is not a setting of the full head"):
        head_config("full", per_hash_softmax=True)
    with pytest.raises(ValueError, match="components, tree are not settings of the superbloom head"):
        head_config("superbloom", components=3, tree="fano")
    with pytest.raises(ValueError, match="draws hashed tokens, whose numbers carry no frequency order"):
        head_config("superbloom", samples=8, proposal="log_uniform")


def test_head_configs_round_trip_and_read_older_model_directories():
    for case in CASES.values():
        assert head_config_from_dict(head_config_dict(case.cfg)) == case.cfg
    old = {"name": "sampled", "per_hash_softmax": False, "label_smoothing": 0.0, "samples": 64,
           "proposal": "unigram", "tree": "huffman"}  # the single HeadConfig of version 0.1
    assert head_config_from_dict(old) == head_config("sampled", samples=64, proposal="unigram")
    old = dict(old, name="superbloom", proposal="log_uniform")  # the sampled head's settings, not the superbloom head's
    assert head_config_from_dict(old) == head_config("superbloom")
    with pytest.raises(ValueError, match="colour is not a setting"):
        head_config_from_dict({"name": "full", "colour": "red"})
    # the removed training options of the hybrid (the term inside the loss) read as absent
    hybrid = {"name": "hybrid", "neighbours": 20, "residual": 10.0, "distill": 0.0, "distill_scale": 30.0,
              "term_folds": 2}
    assert head_config_from_dict(hybrid) == head_config("hybrid", neighbours=20)
    with pytest.raises(ValueError, match="mixture head was removed.*--head full"):
        head_config_from_dict({"name": "mixture", "components": 4})


def test_sampled_head_trains_on_samples_and_evaluates_on_the_full_softmax():
    h, model = make("sampled-log-uniform")
    hidden = torch.randn(4, 1, 16)
    t = torch.tensor([0, 1, 2, 3])
    model.eval()
    full = F.cross_entropy(model.head.logits(hidden), t)
    assert torch.allclose(model.head.loss(hidden, t), full)
    model.train()
    torch.manual_seed(0)
    a = model.head.loss(hidden, t)
    torch.manual_seed(1)
    assert not torch.equal(a, model.head.loss(hidden, t))  # a fresh sample each step


def test_chunks_hold_32_queries_at_the_least_under_the_score_cap():
    """Every id's output row is read once per chunk: at a large vocabulary a chunk of chunk_elems
    scores would be a few queries, so it holds 32 while their scores stay under 2^25 (ranking.py)."""
    from superbloom.heads.ranking import chunk_queries
    assert chunk_queries(4093, 1 << 22) == (1 << 22) // 4093  # a small vocabulary: chunk_elems decides, as before
    assert chunk_queries(957_363, 1 << 22) == 32
    assert chunk_queries(5_000_000, 1 << 22) == (1 << 25) // 5_000_000 == 6  # the cap: 2^25 scores
    assert chunk_queries(10**9, 1 << 22) == 1


def test_full_topk_is_the_same_in_chunks(monkeypatch):
    from superbloom.heads import ranking
    monkeypatch.setattr(ranking, "CHUNK_MIN_QUERIES", 1)  # chunks of chunk_elems scores only
    h, model = make("full-tied")
    model.eval()
    hidden, exclude = queries(h, model)
    whole = model.head.topk(hidden, 8, exclude)
    chunked = model.head.topk(hidden, 8, exclude, chunk_elems=150)  # one query per chunk
    assert torch.equal(whole.ids, chunked.ids) and torch.allclose(whole.scores, chunked.scores)
    assert whole.beam.tolist() == [N_IDS] * len(CONTEXTS)  # every id scored


def test_hierarchical_exhaustive_is_the_same_in_chunks(monkeypatch):
    from superbloom.heads import ranking
    monkeypatch.setattr(ranking, "CHUNK_MIN_QUERIES", 1)  # chunks of chunk_elems scores only
    h, model = make("hierarchical-huffman")
    model.eval()
    hidden, exclude = queries(h, model)
    whole = model.head.topk(hidden, 8, exclude, DecodeConfig(exhaustive=True))
    chunked = model.head.topk(hidden, 8, exclude, DecodeConfig(exhaustive=True), chunk_elems=150)
    assert torch.equal(whole.ids, chunked.ids) and torch.allclose(whole.scores, chunked.scores)


@pytest.mark.parametrize("steps", [0, 1, 2, 8])
def test_hierarchical_topk_falls_back_to_exhaustive_exactly(steps, monkeypatch):
    """Queries A* has not certified within ASTAR_STEPS steps are scored leaf by leaf: same answer."""
    h, model = make("hierarchical-balanced-hashed")
    model.eval()
    hidden, exclude = queries(h, model)
    ref = model.head.topk(hidden, 8, exclude, DecodeConfig(exhaustive=True))
    monkeypatch.setattr(type(model.head), "ASTAR_STEPS", steps)
    got = model.head.topk(hidden, 8, exclude)
    assert torch.equal(got.ids, ref.ids) and torch.allclose(got.scores, ref.scores)
    assert bool(got.exact.all())
    if steps == 0:  # nothing certified before a single step: every query scored exhaustively
        assert got.beam.tolist() == [N_IDS - 1] * len(CONTEXTS)


def test_full_head_takes_the_fused_path_only_where_it_is_exact(monkeypatch):
    """Own hidden row per target, no label smoothing: the fused loss; shared rows or smoothing:
    the log_softmax path. Both give the loss of the direct formula."""
    import superbloom.heads.full as full
    calls = []
    real = full.fused_softmax_nll
    monkeypatch.setattr(full, "fused_softmax_nll", lambda *a: calls.append(1) or real(*a))
    h, model = make("full-tied")
    hidden = torch.randn(5, 1, model.encoder.cfg.d)
    t = torch.tensor([3, 0, 7, 7, 1])
    want = -F.log_softmax(model.head.logits(hidden), -1)[torch.arange(5), t].mean()
    assert torch.allclose(model.head.loss(hidden, t), want, atol=1e-6) and calls == [1]
    rows = torch.tensor([0, 0, 1, 2, 4])
    want = -F.log_softmax(model.head.logits(hidden), -1)[rows, t].mean()
    assert torch.allclose(model.head.loss(hidden, t, rows), want, atol=1e-6) and calls == [1]


def test_a_proposal_without_sampled_negatives_is_refused():
    with pytest.raises(ValueError, match="samples > 0"):
        head_config("hybrid", proposal="uniform")
    with pytest.raises(ValueError, match="proposal must be one of"):
        head_config("hybrid", samples=8, proposal="zipf")
    assert head_config("hybrid").proposal == "log_uniform"  # the default: no sampled negatives, nothing to draw
