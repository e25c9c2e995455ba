"""Hierarchical softmax over the ids (Morin & Bengio 2005; seed notes "Notes on Hierarchical
Softmax", Jarrad 2019): the trees, the path loss and exact top-k by best-first (A*) search.

The N ids are the leaves of a binary tree with N - 1 internal nodes. Internal node i has a logistic
unit, p(bit = 1 | h, node i) = sigma(w_i . h + b_i) (notes eq. 2.3; bit 0 = left, 1 = right), so

    log p(id | h) = sum over the root-to-leaf path of log sigma(+-(w_i . h + b_i))     (eq. 2.1)

and the N probabilities sum to one by construction.

Trees (notes sec. 1), from training counts (+1, so an id never seen still gets a proper leaf):
  balanced  a complete binary tree over the ids in id order (= decreasing frequency, vocab.py):
            every path has floor or ceil(log2 N) nodes; the counts are not needed
  huffman   Huffman coding: the smallest expected path length under the counts
  fano      Shannon-Fano coding: split the frequency-sorted ids recursively into two runs of
            nearly equal total count (simpler; expected paths a little longer than Huffman's)
Internal nodes are numbered breadth-first (root 0): a parent comes before its children and every
depth is one contiguous range, so scoring all leaves is one vectorised step per depth.

Loss: the sum of the binary log-losses on the target's path, vectorised over padded paths.

Top-k (notes sec. 2.2): a path's log-probability only decreases going down, so a best-first
search in log space (A* with a zero heuristic) meets the leaves in order of probability. The
search here runs for every query at once and expands the `expand` best open nodes per step (1 is
textbook A*; more nodes per step cost a little extra work, never exactness), doubling `expand`
after every step: a peaked distribution certifies in a few steps of k nodes, and a flat one (an
untrained or tiny model, where best-first must open most of the tree) takes O(log N) steps instead
of N / k steps that each re-rank an open list of up to N nodes. It stops when the
k-th best leaf found scores at least the best open node: every leaf not yet found lies below an
open node and cannot score more, so the top-k is certified exact. Open nodes that cannot beat the
k-th leaf found are dropped.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .beam import DecodeConfig
from .ranking import NEG_INF, Ranking, chunked_topk, exact_ranking, excluded
from .base import HeadBase
from .config import TREES, HierarchicalConfig  # noqa: F401 (re-exported: callers import them here)

# ---------------------------------------------------------------------------------------- trees


@dataclass
class Tree:
    """A binary tree over ids 0..N-1 with internal nodes 0..N-2 in breadth-first order."""

    children: np.ndarray  # (N-1, 2) int64: child for bit 0 / 1; >= 0 an internal node, < 0 the leaf of id -c-1
    node_parent: np.ndarray  # (N-1,) int64, -1 at the root
    node_bit: np.ndarray  # (N-1,) int64: which child of its parent
    leaf_parent: np.ndarray  # (N,) int64 internal node above each id
    leaf_bit: np.ndarray  # (N,) int64
    levels: list[tuple[int, int]]  # internal nodes of depth t: range(*levels[t])
    depth: np.ndarray  # (N,) path length (code length) of each id

    @property
    def n_ids(self) -> int:
        return len(self.leaf_parent)

    def mean_depth(self, counts: np.ndarray) -> float:
        """Expected path length under the counts (what Huffman minimises)."""
        w = np.asarray(counts, dtype=np.float64)
        return float((w * self.depth).sum() / w.sum())


def from_children(children: np.ndarray) -> Tree:
    """Parents, depths and levels of a tree given breadth-first as (N-1, 2) children codes."""
    children = np.asarray(children, dtype=np.int64)
    n_int = len(children)
    n = n_int + 1
    node_parent = np.full(n_int, -1, np.int64)
    node_bit = np.zeros(n_int, np.int64)
    leaf_parent = np.full(n, -1, np.int64)
    leaf_bit = np.zeros(n, np.int64)
    rows = np.arange(n_int)
    for b in (0, 1):
        c = children[:, b]
        inner = c >= 0
        node_parent[c[inner]], node_bit[c[inner]] = rows[inner], b
        leaf_parent[-c[~inner] - 1], leaf_bit[-c[~inner] - 1] = rows[~inner], b
    if (leaf_parent < 0).any() or (node_parent[1:] < 0).any() or (n_int and node_parent[0] != -1):
        raise ValueError("children do not form one binary tree over every id")
    levels, lo, hi = [], 0, min(1, n_int)
    node_depth = np.zeros(n_int, np.int64)
    while lo < hi:  # children of level [lo, hi) are the next contiguous range (breadth-first order)
        levels.append((lo, hi))
        node_depth[lo:hi] = len(levels) - 1
        nxt = hi + int((children[lo:hi] >= 0).sum())
        lo, hi = hi, nxt
    if hi != n_int or (n_int and (node_parent[1:] >= np.arange(1, n_int)).any()):
        raise ValueError("internal nodes are not numbered breadth-first")
    depth = node_depth[leaf_parent] + 1 if n_int else np.zeros(n, np.int64)
    return Tree(children, node_parent, node_bit, leaf_parent, leaf_bit, levels, depth)


def _breadth_first(kids: np.ndarray, root: int) -> np.ndarray:
    """Renumber internal nodes breadth-first from `root`. kids (N-1, 2) in any numbering."""
    new = np.empty(len(kids), np.int64)
    order, level, nxt = [], np.array([root]), 0
    while level.size:
        new[level] = np.arange(nxt, nxt + level.size)
        nxt += level.size
        order.append(level)
        c = kids[level].ravel()
        level = c[c >= 0]
    out = kids[np.concatenate(order)]
    return np.where(out >= 0, new[np.maximum(out, 0)], out)


def balanced_tree(n: int) -> Tree:
    """Complete binary tree in heap layout: node i has children 2i+1, 2i+2; heap positions
    n-1 .. 2n-2 are the leaves of ids 0 .. n-1 (the low, frequent ids get the shallower leaves)."""
    _check_n(n)
    pos = 2 * np.arange(n - 1, dtype=np.int64)[:, None] + np.array([1, 2])  # (n-1, 2) heap positions
    return from_children(np.where(pos < n - 1, pos, -(pos - (n - 1)) - 1))


def huffman_tree(counts: np.ndarray) -> Tree:
    """Huffman's tree for weights counts + 1 (two-queue method on the sorted weights, O(N))."""
    w = _weights(counts)
    n = len(w)
    order = np.argsort(w, kind="stable")
    leaf_w, leaf_code = w[order].tolist(), (-order - 1).tolist()
    node_w: list[int] = []
    left, right = [0] * (n - 1), [0] * (n - 1)
    head = [0, 0]  # next unmerged leaf, next unmerged node

    def lightest(t: int) -> tuple[int, int]:
        """Pop the lighter front of the leaf queue and the (sorted) queue of the t nodes made so far."""
        i, j = head
        if j >= t or (i < n and leaf_w[i] <= node_w[j]):
            head[0] += 1
            return leaf_w[i], leaf_code[i]
        head[1] += 1
        return node_w[j], j

    for t in range(n - 1):  # merge the two lightest
        (a_w, a), (b_w, b) = lightest(t), lightest(t)
        node_w.append(a_w + b_w)
        left[t], right[t] = a, b
    kids = np.stack([np.array(left, np.int64), np.array(right, np.int64)], 1)
    return from_children(_breadth_first(kids, n - 2))


def fano_tree(counts: np.ndarray) -> Tree:
    """Shannon-Fano tree for weights counts + 1, built one depth at a time (vectorised)."""
    w = _weights(counts)
    n = len(w)
    order = np.argsort(-w, kind="stable")  # ids by decreasing weight
    cw = np.concatenate([[0], np.cumsum(w[order])])  # (n+1,) int64 prefix sums
    lo, hi = np.array([0]), np.array([n])  # runs of the internal nodes of the current depth
    rows, n_nodes = [], 1
    while lo.size:
        total = cw[lo] + cw[hi]  # split s where 2 * cw[s] is nearest to cw[lo] + cw[hi]
        s = np.searchsorted(2 * cw, total)
        s = np.where(np.abs(2 * cw[np.maximum(s - 1, 0)] - total) <= np.abs(2 * cw[np.minimum(s, n)] - total),
                     s - 1, s)
        s = np.clip(s, lo + 1, hi - 1)
        clo = np.stack([lo, s], 1).ravel()  # children runs, in breadth-first order
        chi = np.stack([s, hi], 1).ravel()
        inner = chi - clo >= 2
        code = np.where(inner, n_nodes + np.cumsum(inner) - 1, -order[clo] - 1)
        rows.append(code.reshape(-1, 2))
        n_nodes += int(inner.sum())
        lo, hi = clo[inner], chi[inner]
    return from_children(np.concatenate(rows))


def build_tree(kind: str, n: int, counts: np.ndarray | None = None) -> Tree:
    if kind == "balanced":
        return balanced_tree(n)
    if kind not in TREES:
        raise ValueError(f"tree must be one of {TREES}, got {kind!r}")
    if counts is None:
        raise ValueError(f"a {kind} tree is built from training counts, and none were given; "
                         "pass counts or use tree='balanced'")
    if len(counts) != n:
        raise ValueError(f"{len(counts)} counts for {n} ids")
    return huffman_tree(counts) if kind == "huffman" else fano_tree(counts)


def _check_n(n: int) -> None:
    if n < 2:
        raise ValueError(f"a hierarchical softmax needs at least 2 ids, got {n}")


def _weights(counts) -> np.ndarray:
    w = np.asarray(counts, dtype=np.int64)
    _check_n(len(w))
    if (w < 0).any():
        raise ValueError("counts must be >= 0")
    return w + 1


# ---------------------------------------------------------------------------------------- math


def paths(targets: torch.Tensor, node_parent, node_bit, leaf_parent, leaf_bit, max_depth: int):
    """Root paths of ids (M,) -> nodes, bits, valid, each (M, L), listed leaf-upwards, padded."""
    node, bit = leaf_parent[targets], leaf_bit[targets]
    nodes, bits, valid = [], [], []
    for _ in range(max_depth):
        ok = node >= 0
        if not bool(ok.any()):
            break
        at = node.clamp(min=0)
        nodes.append(at), bits.append(bit), valid.append(ok)
        node, bit = torch.where(ok, node_parent[at], -1), node_bit[at]
    return torch.stack(nodes, 1), torch.stack(bits, 1), torch.stack(valid, 1)


def path_nll(v: torch.Tensor, weight, bias, nodes, bits, valid) -> torch.Tensor:
    """-log p(id | v) from its path: v (M, d), nodes/bits/valid (M, L) -> (M,)."""
    logit = torch.einsum("md,mld->ml", v, weight[nodes]) + bias[nodes]  # (M, L)
    # -log sigma(x) = softplus(-x) for bit 1, -log sigma(-x) = softplus(x) for bit 0
    return (F.softplus(torch.where(bits == 1, -logit, logit)) * valid).sum(1)


def leaf_log_probs(v: torch.Tensor, weight, bias, tree_t: dict, levels) -> torch.Tensor:
    """log p(id | v) for every id (the brute-force reference): v (Q, d) -> (Q, N)."""
    x = v @ weight.T + bias  # (Q, N-1) node logits
    lp = torch.stack([F.logsigmoid(-x), F.logsigmoid(x)], -1).flatten(1)  # (Q, 2(N-1)): node i bit b at 2i+b
    node_score = torch.zeros_like(x)  # (Q, N-1) log-probability of reaching each node
    for lo, hi in levels[1:]:  # index_select on flat columns: ~10x faster than lp[:, par, bit]
        par = tree_t["node_parent"][lo:hi]
        node_score[:, lo:hi] = node_score.index_select(1, par) + lp.index_select(1, 2 * par + tree_t["node_bit"][lo:hi])
    par = tree_t["leaf_parent"]
    return node_score.index_select(1, par) + lp.index_select(1, 2 * par + tree_t["leaf_bit"])


def astar_topk(v: torch.Tensor, weight, bias, children, k: int, exclude=None, expand: int | None = None,
               max_steps: int | None = None):
    """Exact top-k leaves by batched best-first search (module docstring).

    v (Q, d); weight (N-1, d), bias (N-1,) node units; children (N-1, 2) codes; exclude (Q, X) ids
    (-1 padded) never returned; `expand` nodes in the first step, doubling; at most `max_steps`
    steps (default: until certified). -> ids (Q, k) (-1 padded), scores (Q, k) log-probs,
    expanded (Q,) internal nodes expanded, certified (Q,) bool (always all True without max_steps)."""
    q, dev = v.shape[0], v.device
    expand = max(1, expand or k)
    steps = 0
    open_node = torch.zeros(q, 1, dtype=torch.long, device=dev)  # the root
    open_score = torch.zeros(q, 1, dtype=v.dtype, device=dev)
    best_s = torch.full((q, k), NEG_INF, dtype=v.dtype, device=dev)
    best_i = torch.full((q, k), -1, dtype=torch.long, device=dev)
    expanded = torch.zeros(q, dtype=torch.long, device=dev)
    while True:
        kth = best_s[:, -1]
        if not bool((open_score.max(1).values > kth).any()):  # certified for every query
            break
        if max_steps is not None and steps >= max_steps:
            break
        steps += 1
        s, pos = open_score.topk(min(expand, open_score.shape[1]), dim=1)  # (Q, e) best open nodes
        go = s > kth[:, None]  # worth expanding (not -inf, can still beat the k-th leaf)
        node = open_node.gather(1, pos).clamp(min=0)
        open_score = open_score.scatter(1, pos, NEG_INF)  # popped (or useless)
        expand *= 2  # geometric: O(log N) steps even when the distribution is flat
        x = torch.einsum("qd,qed->qe", v, weight[node]) + bias[node]  # (Q, e)
        child_s = (s.masked_fill(~go, NEG_INF)[..., None]
                   + torch.stack([F.logsigmoid(-x), F.logsigmoid(x)], -1)).flatten(1)  # (Q, 2e)
        child = children[node].flatten(1)  # (Q, 2e)
        expanded += go.sum(1)
        leaf = child < 0
        leaf_id = torch.where(leaf, -child - 1, -1)
        leaf_s = child_s.masked_fill(~leaf | excluded(leaf_id, exclude), NEG_INF)
        best_s, p = torch.cat([best_s, leaf_s], 1).topk(k, dim=1)
        best_i = torch.cat([best_i, leaf_id], 1).gather(1, p)
        open_score = torch.cat([open_score, child_s.masked_fill(leaf, NEG_INF)], 1)
        open_node = torch.cat([open_node, child.clamp(min=0)], 1)
        open_score = open_score.masked_fill(open_score <= best_s[:, -1:], NEG_INF)  # cannot beat k-th
        width = max(1, int((open_score > NEG_INF).sum(1).max()))
        if width < open_score.shape[1]:  # compact: live nodes first
            open_score, p = open_score.topk(width, dim=1)
            open_node = open_node.gather(1, p)
    certified = ~(open_score.max(1).values > best_s[:, -1])
    return best_i.masked_fill(best_s == NEG_INF, -1), best_s, expanded, certified


# ---------------------------------------------------------------------------------------- head


class HierarchicalHead(HeadBase):
    """Hierarchical softmax head: one logistic unit (w_i, b_i) per internal node of the tree.

    The m output vectors of an element are averaged into one. `topk` is exact (A*); with
    decode.exhaustive it scores every leaf instead (the reference)."""

    def __init__(self, embedding: nn.Embedding, hashing, cfg: HierarchicalConfig, counts=None):
        super().__init__()
        self.cfg = cfg
        n, d = hashing.n_ids, embedding.embedding_dim
        tree = build_tree(cfg.tree, n, counts)
        self.n_ids, self.levels, self.max_depth = n, tree.levels, int(tree.depth.max())
        self.weight = nn.Parameter(torch.randn(n - 1, d) * 0.02)  # (N-1, d) node units
        self.bias = nn.Parameter(torch.zeros(n - 1))
        self.register_buffer("child", torch.from_numpy(tree.children), persistent=False)  # (N-1, 2)
        for name in ("node_parent", "node_bit", "leaf_parent", "leaf_bit"):
            self.register_buffer(name, torch.from_numpy(getattr(tree, name)), persistent=False)

    def _tree(self) -> dict:
        return {n: getattr(self, n) for n in ("node_parent", "node_bit", "leaf_parent", "leaf_bit")}

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (U, m, d), targets (M,), rows (M,) index into hidden (default: arange(M))."""
        nodes, bits, valid = paths(targets, self.node_parent, self.node_bit, self.leaf_parent, self.leaf_bit,
                                   self.max_depth)
        v = hidden.mean(1)
        return path_nll(v if rows is None else v[rows], self.weight, self.bias, nodes, bits, valid).mean()

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """(Q, m, d) -> (Q, N) log p of every id (brute force)."""
        return leaf_log_probs(hidden.mean(1), self.weight, self.bias, self._tree(), self.levels)

    # A* steps before the queries it has not certified are scored exhaustively instead: with the
    # doubling expansion, up to 2^ASTAR_STEPS * k nodes. Both answers are exact. On a flat
    # distribution (a barely trained model) best-first search opens most of the tree, and the
    # level-by-level exhaustive pass is far cheaper (measured, 278K leaves, balanced tree, 16 flat
    # queries, on a busy machine: A* to certification 12 s, 8 capped steps 0.07 s + exhaustive 1.5 s;
    # before the doubling, A* alone ran over 300 s).
    ASTAR_STEPS = 8

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None,
             chunk_elems: int = 1 << 24) -> Ranking:
        """Exact top-k ids; `beam` of the result counts the internal nodes expanded (A*), or N - 1
        where every leaf was scored: with decode.exhaustive (the reference), and for the queries
        A* did not certify within ASTAR_STEPS steps."""
        v = hidden.mean(1)
        if decode.exhaustive:
            vals, ids = self._exhaustive(v, k, exclude, chunk_elems)
            return exact_ranking(vals, ids, k, decode.score, torch.full((len(hidden),), self.n_ids - 1))
        ids, vals, expanded, done = astar_topk(v, self.weight, self.bias, self.child, k, exclude,
                                               max_steps=self.ASTAR_STEPS)
        if not bool(done.all()):
            rest = (~done).nonzero().squeeze(1)
            ex_v, ex_i = self._exhaustive(v[rest], k, exclude[rest] if exclude is not None else None, chunk_elems)
            vals[rest, :ex_v.shape[1]], ids[rest, :ex_v.shape[1]] = ex_v, ex_i
            vals[rest, ex_v.shape[1]:], ids[rest, ex_v.shape[1]:] = NEG_INF, -1
            expanded[rest] = self.n_ids - 1
        return exact_ranking(vals, ids, k, decode.score, expanded)

    def _exhaustive(self, v: torch.Tensor, k: int, exclude, chunk_elems: int):
        """(Q, d) -> top-k (vals, ids) by scoring every leaf, chunked over queries."""
        tree = self._tree()
        return chunked_topk(lambda a, b: leaf_log_probs(v[a:b], self.weight, self.bias, tree, self.levels),
                            len(v), self.n_ids, k, exclude, chunk_elems, like=v)
