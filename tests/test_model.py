"""Set Transformer: padding cannot change outputs, the encoder is permutation-equivariant, the
hashed loss is the sum over m hashes, gradients reach every parameter, alpha=m=1 is unhashed."""
import numpy as np
import pytest
import torch

from superbloom.model.batches import MaskConfig, query_batch, to_batch, training_batch
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash, HashConfig
from superbloom.heads import SuperbloomConfig
from superbloom.model.encoder import ModelConfig, build_model, count_parameters


def make(alpha=4, m=2, n_ids=200, layers=2, positions=0, norm_first=True, per_hash=False):
    torch.manual_seed(0)
    h = BloomHash.build(n_ids, HashConfig(alpha, m))
    cfg = ModelConfig(d=32, heads=4, d_ff=64, layers=layers, dropout=0.1, positions=positions, norm_first=norm_first)
    return h, build_model(cfg, SuperbloomConfig(per_hash_softmax=per_hash), h).eval()


@pytest.mark.parametrize("norm_first", [True, False])
def test_padding_cannot_change_outputs(norm_first):
    h, model = make(norm_first=norm_first)
    elems = np.array([[3, 17, MASK_ELEM]])
    short = to_batch(elems, np.array([[-1, -1, 0]]), h)
    padded_elems = np.concatenate([elems, np.full((1, 5), PAD_ELEM)], 1)
    padded = to_batch(padded_elems, np.array([[-1, -1, 0] + [-1] * 5]), h)
    assert padded.tokens.shape == (1, 16)
    # garbage in padded positions must not matter either
    padded.tokens[0, 6:] = torch.randint(0, h.n_tokens, (10,))
    a = model.encoder(short.tokens, short.pad)
    b = model.encoder(padded.tokens, padded.pad)
    assert torch.allclose(a, b[:, :6], atol=1e-5)


def test_permutation_equivariance():
    h, model = make()
    elems = np.array([[3, 17, 42, MASK_ELEM]])
    perm = [2, 0, 3, 1]
    a = model.encoder(*_tp(to_batch(elems, -np.ones_like(elems), h)))
    b = model.encoder(*_tp(to_batch(elems[:, perm], -np.ones_like(elems), h)))
    a, b = a.view(1, 4, 2, -1), b.view(1, 4, 2, -1)
    assert torch.allclose(a[:, perm], b, atol=1e-5)
    # hence the prediction for the [MASK] element ignores the order of the context
    q1 = model.head.log_probs(model.target_hidden(query_batch(np.array([[3, 17, 42]]), h)))
    q2 = model.head.log_probs(model.target_hidden(query_batch(np.array([[42, 3, 17]]), h)))
    assert torch.allclose(q1, q2, atol=1e-5)


def _tp(batch):
    return batch.tokens, batch.pad


def test_positions_make_order_matter():
    h, model = make(positions=8)
    q = query_batch(np.array([[3, 17, 42], [42, 3, 17]]), h)
    lp = model.head.log_probs(model.target_hidden(q))
    assert not torch.allclose(lp[0], lp[1], atol=1e-4)


@pytest.mark.parametrize("per_hash", [False, True])
def test_loss_is_sum_over_hashes(per_hash):
    h, model = make(per_hash=per_hash)
    hidden = torch.randn(5, 2, 32)
    targets = torch.tensor([0, 5, 9, 100, 199])
    lp = model.head.log_probs(hidden)  # (5, 2, nb)
    local = torch.from_numpy(h.buckets[:, targets.numpy()].T).long()
    want = -lp.gather(2, local[..., None]).squeeze(-1).sum(1).mean()
    assert torch.allclose(model.head.loss(hidden, targets), want, atol=1e-5)


def test_gradients_reach_every_parameter(rng):
    h, model = make()
    model.train()
    sets = SetArray.from_lists([list(rng.choice(200, 20, replace=False)) for _ in range(8)])
    loss = model(training_batch(sets, np.arange(8), h, MaskConfig(mask_rate=0.5), rng))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_embeddings_are_tied_and_counted_once():
    h, model = make()
    assert model.head.embedding.weight is model.encoder.embed.weight
    n = count_parameters(model)
    assert n == sum(p.numel() for p in set(model.parameters()))
    assert n < sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))


def test_unhashed_model_scores_every_id_once():
    h, model = make(alpha=1, m=1, n_ids=30)
    assert h.n_tokens == 35
    hidden = torch.randn(2, 1, 32)
    lp = model.head.log_probs(hidden)  # (2, 1, 30): one bucket per id
    r = model.head.topk(hidden, 30)
    assert r.exact.all() and sorted(r.ids[0].tolist()) == list(range(30))
    assert torch.allclose(r.scores[0], lp[0, 0].sort(descending=True).values)


def test_eval_mode_is_deterministic():
    h, model = make()
    q = query_batch(np.array([[1, 2, 3]]), h)
    assert torch.equal(model.target_hidden(q), model.target_hidden(q))


def test_merged_masks_give_the_same_outputs_and_loss(rng):
    """One [MASK] element of multiplicity c with a log(c) attention bias (batches.merge_masks)
    equals c identical [MASK] elements: same outputs for every other element, same loss."""
    torch.manual_seed(0)
    h = BloomHash.build(200, HashConfig(4, 2))
    cfg = ModelConfig(d=32, heads=4, d_ff=64, layers=2, dropout=0.0)
    sets = SetArray.from_lists([list(rng.choice(200, 25, replace=False)) for _ in range(6)])
    for per_hash in (False, True):
        model = build_model(cfg, SuperbloomConfig(per_hash_softmax=per_hash), h).train()
        state = rng.bit_generator.state
        plain = training_batch(sets, np.arange(6), h, MaskConfig(mask_rate=0.5), rng, merge=False)
        rng.bit_generator.state = state
        merged = training_batch(sets, np.arange(6), h, MaskConfig(mask_rate=0.5), rng, merge=True)
        assert merged.tokens.shape[1] < plain.tokens.shape[1] and merged.mult.max() > 1
        assert torch.equal(plain.target_ids, merged.target_ids)
        a, b = model.target_hidden(plain), model.target_hidden(merged)
        assert torch.allclose(a, b, atol=1e-5)
        assert torch.allclose(model(plain), model(merged), atol=1e-5)
        # and the shared rows give the loss of scoring every target separately
        assert torch.allclose(model(plain), model.head.loss(a, plain.target_ids), atol=1e-5)
