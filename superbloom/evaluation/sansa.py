"""SANSA (Spisak, Bartyzal & Tyrsa, RecSys 2023): a sparse approximate EASE, as a baseline.

EASE's weights are -P / diag(P) with P = (X^T X + l2 I)^-1, dense. SANSA factors X^T X + l2 I = L D L^T
by an incomplete Cholesky (ICF) at a target density of L, inverts the unit triangle L approximately
and sparsely (UMR, one scan and `finetune` steps), and scores a context x by (x A) B with the two
sparse factors A = W^T, B = D^-1 W / -diag(W^T D^-1 W). The [sansa] extra installs it; it needs
scikit-sparse, which needs SuiteSparse's headers (Debian: libsuitesparse-dev). Checked before any
work (require_sansa). scikit-sparse 0.5.0 did not build against Debian bookworm's SuiteSparse 5.12;
0.4.16 did.

Ordering: SANSA's fill-reducing ordering (COLAMD over X^T) did not finish in 27 minutes at 1M ids,
so from ORDER_BY_COUNT_IDS ids the columns are sorted by training count (rarest first) and CHOLMOD's
natural ordering is used ("count"); below, COLAMD ("colamd"). `ordering` forces either.
"""
from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from .._extras import require_extra

log = logging.getLogger(__name__)

ORDER_BY_COUNT_IDS = 200_000
INSTALL = ("apt-get install -y libsuitesparse-dev && pip install cython numpy && "
           "pip install --no-build-isolation 'scikit-sparse==0.4.16' && pip install sansa")


def require_sansa() -> None:
    """MissingExtra naming the extra and the exact install commands, before any work."""
    try:
        require_extra("sansa", "the sansa baseline (--baselines sansa)")
    except ImportError as e:
        raise type(e)(f"{e}; scikit-sparse needs SuiteSparse's headers first: {INSTALL}", name=e.name) from None


class _Natural:
    value = "natural"  # CHOLMOD's ordering_method: keep the given column order


def fit_sansa(train, n_ids: int, l2: float = 20.0, density: float = 5e-5, finetune: int = 1, ordering: str = "auto"):
    """SANSA's two sparse factors of the training sets (a SetArray) -> (A, B), (N, N) CSR each, in the
    ids' order: score(context x) = (x A) B (module docstring)."""
    require_sansa()
    import sansa

    if ordering not in ("auto", "colamd", "count"):
        raise ValueError(f"sansa ordering must be auto, colamd or count, got {ordering!r}")
    x = train.incidence(n_ids)  # (S, N) binary
    by_count = ordering == "count" or (ordering == "auto" and n_ids >= ORDER_BY_COUNT_IDS)
    counts = np.asarray(x.sum(0)).ravel()
    used = np.flatnonzero(counts)  # ids no training set holds are left out (sansa's norms fail on an empty
    # last column) and score 0
    perm = used[np.argsort(counts[used], kind="stable")] if by_count else used
    config = sansa.SANSAConfig(l2=l2, weight_matrix_density=density,
                               gramian_factorizer_config=sansa.ICFGramianFactorizerConfig(),
                               lower_triangle_inverter_config=sansa.UMRUnitLowerTriangleInverterConfig(
                                   scans=1, finetune_steps=finetune))
    model = sansa.SANSA(config)
    if by_count:
        model.factorizer.reordering_method = _Natural()
    model.fit(x[:, perm].tocsr())
    a, b = model.weights  # over the fitted columns, in perm's order

    def full(w):  # back to every id, in the ids' order
        w = w.tocoo()
        return sp.csr_matrix((w.data, (perm[w.row], perm[w.col])), shape=(n_ids, n_ids))

    return full(a), full(b)
