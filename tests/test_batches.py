"""Training examples (paper sec. 3.1): segments, masking rates, corruption split, hashing."""
import numpy as np

from superbloom.model.batches import MaskConfig, epoch_batches, mask_segments, merge_masks, query_batch, sample_segments, training_batch
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash, HashConfig


def test_segments_are_contiguous_and_capped(rng):
    sets = SetArray.from_lists([list(range(100, 150)), [7, 8, 9], [5]])
    segs = sample_segments(sets, np.array([0, 1, 2]), 32, rng)
    assert segs.shape == (3, 32)
    row = segs[0]
    assert (np.diff(row) == 1).all() and 100 <= row[0] <= 118  # 32 consecutive ids of set 0
    assert segs[1, :3].tolist() == [7, 8, 9] and (segs[1, 3:] == PAD_ELEM).all()
    assert segs[2, 0] == 5


def test_masking_statistics(rng):
    n_ids = 1000
    segs = rng.integers(0, n_ids, (20000, 32))
    segs[:, 20:] = PAD_ELEM  # segments of 20
    elems, targets = mask_segments(segs, n_ids, MaskConfig(mask_rate=0.15, p_mask=0.8, p_random=0.1), rng)  # BERT, the paper
    masked = targets >= 0
    assert (masked.sum(1) == 3).all()  # round(0.15 * 20) = 3, exactly
    assert not masked[:, 20:].any()  # never padding
    assert (targets[masked] == segs[masked]).all()
    fed_mask = (elems == MASK_ELEM)[masked].mean()
    unchanged = (elems == segs)[masked].mean()
    assert abs(fed_mask - 0.8) < 0.01
    assert abs(unchanged - 0.1) < 0.01 + 1 / n_ids  # a random id can equal the original
    assert abs(1 - fed_mask - unchanged - 0.1) < 0.01
    assert (elems[~masked] == segs[~masked]).all()


def test_at_least_one_masked(rng):
    segs = np.array([[3, PAD_ELEM, PAD_ELEM], [4, 5, PAD_ELEM]])
    _, targets = mask_segments(segs, 10, MaskConfig(mask_rate=0.15), rng)
    assert ((targets >= 0).sum(1) == 1).all()


def test_training_batch_tokens(rng):
    h = BloomHash.build(50, HashConfig(5, 2))
    sets = SetArray.from_lists([list(range(10)), list(range(20, 25))])
    b = training_batch(sets, np.array([0, 1]), h, MaskConfig(mask_rate=0.15, element_dropout=0.0), rng, merge=False)
    assert b.tokens.shape == (2, 20) and b.pad.shape == (2, 20) and b.mult.shape == (2, 10)
    assert b.pad[1, 10:].all() and not b.pad[1, :10].any()
    assert b.positions[0, :4].tolist() == [0, 0, 1, 1]
    assert b.n_targets == 2 + 1  # round(0.15 * 10), max(1, round(0.15 * 5))
    flat = np.concatenate([np.arange(10), np.arange(20, 25), [-1] * 5])  # the segments, row-major
    assert (flat[b.target_elem.numpy()] == b.target_ids.numpy()).all()


def test_merge_masks():
    elems = np.array([[MASK_ELEM, 5, MASK_ELEM, 7, MASK_ELEM, PAD_ELEM],
                      [3, 9, 4, PAD_ELEM, PAD_ELEM, PAD_ELEM]])
    targets = np.array([[11, -1, 12, 7, 13, -1],  # three [MASK]s and one unchanged target
                        [-1, 20, -1, -1, -1, -1]])  # a target fed as a random id, no [MASK]
    out, mult, t_elem, t_ids = merge_masks(elems, targets)
    assert out.tolist() == [[5, 7, MASK_ELEM], [3, 9, 4]]
    assert mult.tolist() == [[1, 1, 3], [1, 1, 1]]
    assert t_ids.tolist() == [11, 12, 7, 13, 20]
    assert t_elem.tolist() == [2, 2, 1, 2, 3 + 1]


def test_query_batch_appends_mask():
    h = BloomHash.build(50, HashConfig(5, 2))
    b = query_batch(np.array([[3, -1, 4], [-1, -1, 7]]), h)
    assert b.tokens.shape == (2, 6)  # width 2 known ids + [MASK]
    assert b.tokens[0, 4:].tolist() == h.special_tokens(1).tolist()
    assert b.pad[1, 2:4].all() and not b.pad[1, 4:].any()
    assert b.target_elem.tolist() == [2, 5]  # the [MASK] element of each row


def test_epoch_batches_cover_each_row_once(rng):
    rows = np.arange(1000)
    lengths = rng.integers(2, 60, 1000)
    batches = epoch_batches(rows, lengths, 32, 32, rng, pool=5)
    got = np.concatenate(batches)
    assert len(got) == 992 and len(np.unique(got)) == 992  # the short tail waits
    assert all(len(b) == 32 for b in batches)


def test_element_dropout_drops_only_unmasked_context(rng):
    from superbloom.model.batches import drop_elements

    elems = np.array([[5, 6, MASK_ELEM, 8, PAD_ELEM], [1, 2, 3, 4, 9]])
    targets = np.array([[-1, -1, 7, -1, -1], [-1, 2, -1, -1, -1]])
    out = drop_elements(elems, targets, 0.999, rng)
    assert out.tolist() == [[PAD_ELEM, PAD_ELEM, MASK_ELEM, PAD_ELEM, PAD_ELEM], [PAD_ELEM, 2, PAD_ELEM, PAD_ELEM, PAD_ELEM]]
    assert (drop_elements(elems, targets, 0.0, rng) == elems).all()
    big = np.tile(np.arange(1000), (4, 1))
    kept = (drop_elements(big, np.full(big.shape, -1), 0.2, rng) >= 0).mean()
    assert 0.77 < kept < 0.83
