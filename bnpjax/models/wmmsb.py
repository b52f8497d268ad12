r"""The weighted mixed-membership stochastic blockmodel (WMMSB) and the unweighted MMSB.

Math: ``../shared/seeds/003_e1e629acb32e903e.txt`` (Dulac's thesis, appendix "WMMSB inference
derivations"), equation labels ``eq1`` (the CVB update), ``eq:update2`` (the Beta-Gamma
update) and the unlabelled collapsed Gibbs conditional stated right after ``eq1``.

Model
-----
``N`` nodes; an observed pair ``(i, j)`` (ordered when directed; ``i < j`` when undirected;
never ``i = j``) carries a count :math:`y_{ij} \ge 0`. Unobserved (held-out) pairs are left
out of every sum, never read as zeros::

    theta_i ~ Dirichlet(alpha)                              (memberships, i = 1..N)
    s_ij = z_{i->j} ~ Cat(theta_i),  r_ij = z_{i<-j} ~ Cat(theta_j)
    phi_kk' ~ Gamma(shape r, scale p / (1 - p))             (likelihood="nb": WMMSB)
    y_ij | z, phi ~ Poisson(phi_{s_ij r_ij})

so that, with :math:`\phi` integrated out, a single pair is :math:`\mathrm{NB}(r, p)` and the
predictive of a pair given the others in its block is the seed's
:math:`\mathrm{NB}(y; n^Y_{kk'} + r, p / (p\, n^\Phi_{kk'} + 1))` (Gamma-Poisson posterior:
shape :math:`r + n^Y`, scale :math:`\frac{p/(1-p)}{n^\Phi p/(1-p) + 1}`, whose NB success
probability simplifies to :math:`p/(p n^\Phi + 1)`). ``NB(y; a, q)`` has pmf
:math:`\binom{y+a-1}{y} (1-q)^a q^y`, the parametrisation of the seed's ``r`` update.
``likelihood="bernoulli"`` is the MMSB: :math:`y \in \{0, 1\}`,
:math:`\phi_{kk'} \sim \mathrm{Beta}(a, b)`, predictive
:math:`P(y = 1) = (n^Y_{kk'} + a) / (n^\Phi_{kk'} + a + b)`. For undirected networks the block
matrix is not symmetrised (each unordered pair is stored once, as ``(min, max)``); this is a
proper generative model of the same data with a ``K x K`` matrix of free blocks.

Counts: :math:`n_{ik}` = number of indicators drawn from :math:`\theta_i` equal to ``k`` (the
sender indicators of the pairs ``(i, .)`` plus the receiver indicators of the pairs
``(., i)``; the seed's :math:`n^\Theta_{\to ik}` and :math:`n^\Theta_{\leftarrow jk}`, which is
what integrating :math:`\theta_i` out gives), :math:`n^Y_{kk'} = \sum y_{ij} [s_{ij}=k,
r_{ij}=k']`, :math:`n^\Phi_{kk'} = \sum [s_{ij}=k, r_{ij}=k']`.

Collapsed Gibbs (seed, the conditional stated after ``eq1``)
------------------------------------------------------------
.. math::

    P(s_{ij}=k, r_{ij}=k' \mid \cdot) \propto (n^{-ij}_{ik} + \alpha_k)
        (n^{-ij}_{jk'} + \alpha_{k'})\, \mathrm{pred}(y_{ij} \mid n^{Y,-ij}_{kk'},
        n^{\Phi,-ij}_{kk'}).

Pairs are visited in sequence (a ``lax.scan``): every pair is coupled to every other through
the block counts, so there is no conditionally independent set to vectorise over; the
``K x K`` joint of one pair is one vectorised categorical draw.

CVB0 (seed ``eq1`` and its zero-order Taylor form)
--------------------------------------------------
:math:`\gamma_{ijkk'}` replaces the indicator pair by its variational joint and every count by
its expectation under :math:`q` (Asuncion et al. 2009, CVB0):
:math:`\gamma_{ijkk'} \propto (N^{-ij}_{ik} + \alpha_k)(N^{-ij}_{jk'} + \alpha_{k'})\,
\mathrm{pred}(y_{ij} \mid N^{Y,-ij}_{kk'}, N^{\Phi,-ij}_{kk'})`, with ``N`` the sums of the
:math:`\gamma` (``N x K`` node and ``K x K`` block arrays). The update is synchronous: every
pair is updated from the statistics of the previous iteration in one vectorised pass over
fixed-size chunks of pairs (``lax.scan``; memory ``chunk x K^2``). With ``store_gamma=True``
the previous :math:`\gamma_{ij}` is kept and subtracted (the exact "-ij" counts; memory
``pairs x K^2``); with ``store_gamma=False`` the counts include the pair itself (an
:math:`O(1/\text{pairs per node})` difference, memory independent of the number of pairs, the
form stochastic CVB0 uses). The observed zeros (most pairs) are either listed like the links
(``zeros="list"``: the exact update above) or held as a dense ``N x N`` mask
(``zeros="dense"``): with inclusive counts every zero pair's :math:`\gamma` is
:math:`\hat\theta_i \hat\theta_j^\top \circ E` normalised, ``E`` the ``K x K`` predictive of
a zero, so the whole pass over the zeros is a few matrix products, ``O(N^2 K)`` work and no
per-pair ``K x K`` array (:func:`_dense_zero_pass`). The pass is vectorised over all pairs at
once, which is exactly the synchronous CVB0 update: every pair reads the statistics of the
previous pass, never those being accumulated.

Beta-Gamma variant (WMMSB-bg; seed "Beta-Gamma updates")
-------------------------------------------------------
:math:`r_{kk'} \sim \mathrm{Gamma}(r_0 c_0, \text{rate } c_0)`,
:math:`p_{kk'} \sim \mathrm{Beta}(c\epsilon, c(1-\epsilon))`; after each :math:`\gamma` pass

.. math::

    E_q[r_{kk'}] = \frac{r_0 c_0 + N^Y_{kk'}}{c_0 - N^\Phi_{kk'} \log(1 - E_q[p_{kk'}])},
    \qquad q(p_{kk'}) = \mathrm{Beta}(c\epsilon + N^Y_{kk'},
        c(1-\epsilon) + N^\Phi_{kk'} E_q[r_{kk'}]),

(the seed's closed forms; :math:`p` inside the logarithm is the current :math:`E_q[p]`, the
seed's first-order plug-in) and the :math:`\gamma` update uses :math:`E_q[r], E_q[p]` in
place of ``r, p``.

Stochastic CVB0 (Foulds et al. 2013, adapted as in the thesis)
--------------------------------------------------------------
A minibatch is ``B`` nodes drawn without replacement; for each node ``i``: all its observed
explicit pairs (its links) plus ``S`` partner draws ``j`` uniform over the other nodes (and a
random direction when directed), kept when ``(i, j)`` is an observed implicit zero. Reweighting
makes every statistic unbiased: a link pair is in the batch when either endpoint is drawn,
probability :math:`2B/N`, weight :math:`N/(2B)`; a given zero pair is drawn with probability
:math:`2BS/(N(N-1))` undirected (:math:`BS/(N(N-1))` per orientation directed), weights the
inverses. Block statistics move as :math:`N \leftarrow (1-\rho_t) N + \rho_t \hat N` with
:math:`\rho_t = (\tau + t)^{-\kappa}` (an optax schedule; thesis :math:`\tau = 1024,
\kappa = 0.5`); the drawn nodes' rows move the same way with their own counter
(:math:`\rho = (1 + t_i)^{-\kappa}`), their full rows estimated from the node's links (weight
1) and draws (weight :math:`(N-1)/S`, or :math:`2(N-1)/S` directed). Memory is ``O(N K + K^2 +
B (d_max + S) K^2)``, independent of :math:`N^2`. Every ``eval_every`` steps the validation
log-likelihood is computed; the run stops (later steps are no-ops) when it has not improved
by ``tol`` (relative) for ``patience`` evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import gammaln

from bnpjax._checks import check_integer
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, concrete_or_none
from bnpjax.ops import sample_categorical, segment_sum

__all__ = [
    "LIKELIHOODS",
    "CVB0Info",
    "CVB0State",
    "GibbsInfo",
    "GibbsState",
    "SCVB0Info",
    "SCVB0State",
    "WMMSBData",
    "WMMSBHyper",
    "block_means",
    "collapsed_gibbs",
    "cvb0",
    "data_sample",
    "hash_uniform",
    "link_probability",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "make_network",
    "memberships",
    "pair_keys",
    "prior_sample",
    "scvb0",
]

LIKELIHOODS = ("nb", "bg", "bernoulli")


# --------------------------------------------------------------------------------------------
# data


class WMMSBData(NamedTuple):
    """Observed pairs of a network (all arrays; ``N = degree.shape[0]`` is static).

    Explicit pairs (``src``, ``dst``, ``y``, ``w``): the links and any pair given with its
    value (Geweke data hold every pair here). Implicit zeros (``zsrc``, ``zdst``, ``zw``): the
    observed non-links, enumerated only when the network is small enough (full-batch
    methods); stochastic CVB0 draws them on the fly instead: a pair is an observed zero iff it
    is not in ``special`` (sorted keys of the explicit and the unobserved pairs) and
    ``hash_uniform(key, seed) < keep``. ``w`` is 1 for a real pair and 0 for padding.
    ``adj_ptr``/``adj`` list the explicit pairs of each node (CSR), ``max_degree`` padded.
    """

    degree: jax.Array  # (N,) explicit pairs per node (float)
    src: jax.Array
    dst: jax.Array
    y: jax.Array
    w: jax.Array
    zsrc: jax.Array
    zdst: jax.Array
    zw: jax.Array
    adj_ptr: jax.Array  # (N + 1,) int32
    adj: jax.Array  # (2 P,) int32 explicit pair ids, grouped by node
    special: jax.Array  # sorted int32 keys
    keep: jax.Array  # () float
    seed: jax.Array  # () uint32
    directed: jax.Array  # () bool
    num_zeros: jax.Array  # () float, number of observed implicit zeros (exact or estimated)
    zmask: jax.Array  # (N, N) 1.0 at observed zeros (zeros="dense"), else (0, 0)


class WMMSBHyper(NamedTuple):
    """``alpha`` (K,) Dirichlet; ``r``, ``p`` (nb: NB(r, p) prior predictive; bernoulli: the
    Beta(a = r, b = p) prior); ``r0``, ``c0``, ``c``, ``eps`` (bg priors)."""

    alpha: jax.Array
    r: jax.Array
    p: jax.Array
    r0: jax.Array
    c0: jax.Array
    c: jax.Array
    eps: jax.Array


def make_hyper(
    K: int,
    *,
    likelihood: str = "nb",
    alpha=None,
    r: float | None = None,
    p: float | None = None,
    r0: float = 1.0,
    c0: float = 1.0,
    c: float = 1.0,
    eps: float = 0.5,
) -> WMMSBHyper:
    """Hyperparameters. Defaults: ``alpha_k = 1/K`` (the thesis protocol); nb ``r = 1``,
    ``p = 0.5``; bernoulli Beta(1, 1) (``r = a``, ``p = b``); bg ``r0 = c0 = c = 1``,
    ``eps = 0.5`` (seed's priors Gamma(r0 c0, rate c0) and Beta(c eps, c(1-eps)))."""
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 1:
        raise ValueError(f"K must be a positive integer, got {K!r}")
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    alpha = np.full(K, 1.0 / K) if alpha is None else np.broadcast_to(np.asarray(alpha, float), K)
    if r is None:
        r = 1.0
    if p is None:
        p = 1.0 if likelihood == "bernoulli" else 0.5
    values = {"r": r, "p": p, "r0": r0, "c0": c0, "c": c}
    for name, value in values.items():
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError("alpha must be positive")
    if likelihood != "bernoulli" and not p < 1:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1), got {eps}")
    dtype = jnp.result_type(float)
    return WMMSBHyper(
        jnp.asarray(alpha, dtype), *(jnp.asarray(v, dtype) for v in (r, p, r0, c0, c, eps))
    )


def hash_uniform(keys, seed):
    """A fixed uint32 mixing hash of pair keys, as uniforms in [0, 1) (24 bits). The same
    formula in NumPy and JAX (works on both), so membership of implicit zeros in a training
    subsample is decided identically on host and device; subsamples at growing ``keep`` are
    nested."""
    xp = jnp if isinstance(keys, jax.Array) else np
    with np.errstate(over="ignore"):
        x = xp.asarray(keys).astype(xp.uint32) ^ xp.asarray(seed).astype(xp.uint32)
        x = x * xp.uint32(0x9E3779B1)
        x = x ^ (x >> xp.uint32(16))
        x = x * xp.uint32(0x85EBCA6B)
        x = x ^ (x >> xp.uint32(13))
        x = x * xp.uint32(0xC2B2AE35)
        x = x ^ (x >> xp.uint32(16))
    return (x >> xp.uint32(8)).astype(xp.float32) / np.float32(2**24)


def pair_keys(src, dst, n_nodes: int, directed: bool):
    """``i * N + j`` for directed pairs, ``min * N + max`` for undirected (int32; N < 46341)."""
    xp = jnp if isinstance(src, jax.Array) else np
    src = xp.asarray(src).astype(xp.int32)
    dst = xp.asarray(dst).astype(xp.int32)
    if not directed:
        src, dst = xp.minimum(src, dst), xp.maximum(src, dst)
    return src * xp.int32(n_nodes) + dst


def _int_array(name, value, n=None):
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have length {n}, got {arr.shape[0]}")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be numeric")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN/inf)")
    return arr


def _check_counts(name, y, likelihood):
    if np.any(y < 0):
        raise ValueError(f"{name} must be non-negative counts")
    if np.any(y != np.round(y)):
        raise ValueError(f"{name} must be integer counts (round real weights first)")
    if likelihood == "bernoulli" and np.any(y > 1):
        raise ValueError(f"{name} must be 0/1 for the bernoulli (MMSB) likelihood")


def _check_likelihood(likelihood):
    if not isinstance(likelihood, str) or likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


def make_network(
    n_nodes: int,
    src,
    dst,
    weight=None,
    *,
    directed: bool,
    unobserved=None,
    keep: float = 1.0,
    seed: int = 0,
    zeros: str | None = None,
    likelihood: str = "nb",
    pad_to: int = 1,
) -> WMMSBData:
    """Validate an edge list and build :class:`WMMSBData`.

    ``src``, ``dst`` (0-based node ids in ``[0, n_nodes)``), ``weight`` (non-negative integer
    counts, default 1) are the observed explicit pairs; every other pair is an observed zero
    unless it is in ``unobserved`` (an ``(M, 2)`` array of pairs: held out, missing) or fails
    the subsampling test ``hash_uniform(key, seed) < keep``. Self-loops are excluded from the
    model and refused. ``zeros`` says how the full-batch methods see the observed zeros: "list"
    (every zero pair listed: exact CVB0 and collapsed Gibbs), "dense" (an ``N x N`` mask: CVB0
    by matrix products, the default up to ``N = 20000``) or "none" (stochastic CVB0 only).
    ``pad_to`` (a positive integer) pads the pair lists to a multiple (weight 0). ``seed``
    (an integer in ``[0, 2**32)``, the uint32 hash seed) and ``likelihood`` (one of
    :data:`LIKELIHOODS`; "bernoulli" requires 0/1 weights) are checked here."""
    check_integer(n_nodes, "n_nodes", 2)
    _check_likelihood(likelihood)
    pad_to = check_integer(pad_to, "pad_to", 1)
    if check_integer(seed, "seed", 0) >= 2**32:
        raise ValueError(
            f"seed must be an integer in [0, 2**32) (a uint32 hash seed), got {seed!r}"
        )
    if n_nodes > 46_340:
        raise ValueError("n_nodes must be at most 46340 (int32 pair keys)")
    N = int(n_nodes)
    src = _int_array("src", src)
    dst = _int_array("dst", dst, src.shape[0])
    for name, ids in (("src", src), ("dst", dst)):
        if np.any(ids != np.round(ids)) or np.any(ids < 0) or np.any(ids >= N):
            raise ValueError(f"{name} holds node ids outside 0..{N - 1} or non-integers")
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    y = np.ones(src.shape[0]) if weight is None else _int_array("weight", weight, src.shape[0])
    _check_counts("weight", y, likelihood)
    if np.any(src == dst):
        raise ValueError("src/dst: self-loops are excluded from the model; drop them first")
    if not directed:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    keys = pair_keys(src, dst, N, True)
    if np.unique(keys).shape[0] != keys.shape[0]:
        raise ValueError("src/dst: duplicate pairs (for undirected data, i-j and j-i)")
    if not (np.isfinite(keep) and 0 < keep <= 1):
        raise ValueError(f"keep must lie in (0, 1], got {keep}")
    blocked = np.zeros(0, np.int64)
    if unobserved is not None:
        u = np.asarray(unobserved)
        if u.ndim != 2 or u.shape[1] != 2:
            raise ValueError(f"unobserved must be an (M, 2) array of pairs, got {u.shape}")
        _int_array("unobserved", u.reshape(-1))
        if np.any(u < 0) or np.any(u >= N) or np.any(u != np.round(u)):
            raise ValueError(f"unobserved holds node ids outside 0..{N - 1}")
        blocked = np.unique(pair_keys(u[:, 0], u[:, 1], N, directed))
        drop = np.isin(keys, blocked)
        src, dst, y, keys = src[~drop], dst[~drop], y[~drop], keys[~drop]
    special = np.union1d(keys, blocked)
    num_pairs = N * (N - 1) if directed else N * (N - 1) // 2
    if zeros is None:
        zeros = "dense" if N <= 20_000 else "none"
    if zeros not in ("list", "dense", "none"):
        raise ValueError(f"zeros must be 'list', 'dense' or 'none', got {zeros!r}")
    zmask = np.zeros((0, 0), np.float32)
    zsrc = zdst = np.zeros(0, np.int64)
    if zeros != "none":
        zmask = ~np.eye(N, dtype=bool) if directed else np.triu(np.ones((N, N), bool), 1)
        zmask.reshape(-1)[special] = False
        if keep < 1:
            zmask &= hash_uniform(np.arange(N * N, dtype=np.int64).reshape(N, N), seed) < keep
        num_zeros = float(zmask.sum())
        if zeros == "list":
            zsrc, zdst = np.nonzero(zmask)
            zmask = np.zeros((0, 0), np.float32)
    else:
        zsrc = zdst = np.zeros(0, np.int64)
        num_zeros = float((num_pairs - special.shape[0]) * keep)
    if num_zeros + src.shape[0] == 0:
        raise ValueError("no observed pair is left")
    degree = np.bincount(src, minlength=N) + np.bincount(dst, minlength=N)
    order = np.argsort(np.concatenate([src, dst]), kind="stable")
    adj = np.concatenate([np.arange(src.shape[0])] * 2)[order]
    adj_ptr = np.concatenate([[0], np.cumsum(degree)])

    def pad(a, fill=0):
        extra = (-a.shape[0]) % pad_to
        return np.concatenate([a, np.full(extra, fill, a.dtype)])

    dtype = jnp.result_type(float)
    w = np.ones(src.shape[0])
    zw = np.ones(zsrc.shape[0])
    return WMMSBData(
        degree=jnp.asarray(degree, dtype),
        src=jnp.asarray(pad(src), jnp.int32),
        dst=jnp.asarray(pad(dst, 1), jnp.int32),
        y=jnp.asarray(pad(y.astype(float)), dtype),
        w=jnp.asarray(pad(w), dtype),
        zsrc=jnp.asarray(pad(zsrc), jnp.int32),
        zdst=jnp.asarray(pad(zdst, 1), jnp.int32),
        zw=jnp.asarray(pad(zw), dtype),
        adj_ptr=jnp.asarray(adj_ptr, jnp.int32),
        adj=jnp.asarray(np.concatenate([pad(adj), pad(adj)]), jnp.int32),
        special=jnp.asarray(special, jnp.int32),
        keep=jnp.asarray(keep, dtype),
        seed=jnp.asarray(seed, jnp.uint32),
        directed=jnp.asarray(bool(directed)),
        num_zeros=jnp.asarray(num_zeros, dtype),
        zmask=jnp.asarray(zmask, dtype),
    )


def make_data(
    Y,
    mask=None,
    *,
    directed: bool | None = None,
    likelihood: str = "nb",
    explicit: bool = False,
    zeros: str = "list",
) -> WMMSBData:
    """Validate a dense ``(N, N)`` count matrix ``Y`` (and optional boolean ``mask``, True =
    observed) and build :class:`WMMSBData`. ``directed=None`` means directed unless ``Y`` (and
    ``mask``) are symmetric; undirected data must be symmetric and use the upper triangle. The
    diagonal is outside the model: it must be zero (or masked). ``explicit=True`` keeps every
    observed pair in the explicit list (the Geweke layout) instead of the implicit zeros;
    ``zeros`` as in :func:`make_network`; ``likelihood`` one of :data:`LIKELIHOODS`
    ("bernoulli" requires 0/1 entries)."""
    _check_likelihood(likelihood)
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[0] != Y.shape[1] or Y.shape[0] < 2:
        raise ValueError(f"Y must be a square (N, N) matrix with N >= 2, got shape {Y.shape}")
    if Y.dtype == bool or not np.issubdtype(Y.dtype, np.number):
        raise ValueError("Y must be numeric counts")
    N = Y.shape[0]
    observed = np.ones((N, N), bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != Y.shape:
            raise ValueError(f"mask must have the shape of Y {Y.shape}, got {mask.shape}")
        if mask.dtype != bool and not np.all((mask == 0) | (mask == 1)):
            raise ValueError("mask must be boolean (True = observed)")
        observed = mask.astype(bool)
    if not np.all(np.isfinite(Y[observed])):
        raise ValueError("Y must be finite where observed (mask out missing entries)")
    _check_counts("Y", Y[observed], likelihood)
    if np.any(np.diag(Y)[np.diag(observed)] != 0):
        raise ValueError("Y has self-loops on the diagonal: they are excluded; zero or mask them")
    Yz = np.where(observed, Y, 0)
    if directed is None:
        directed = not (np.array_equal(Yz, Yz.T) and np.array_equal(observed, observed.T))
    elif not directed and not (np.array_equal(Yz, Yz.T) and np.array_equal(observed, observed.T)):
        raise ValueError("undirected Y and mask must be symmetric")
    off = ~np.eye(N, dtype=bool) if directed else np.triu(np.ones((N, N), bool), 1)
    pick = off & observed & ((Yz != 0) | explicit)
    ii, jj = np.nonzero(pick)
    ui, uj = np.nonzero(off & ~observed)
    return make_network(
        N,
        ii,
        jj,
        Yz[ii, jj],
        directed=directed,
        unobserved=np.stack([ui, uj], 1),
        likelihood=likelihood,
        zeros="none" if explicit else zeros,
    )


def _num_nodes(data: WMMSBData) -> int:
    return data.degree.shape[0]


# --------------------------------------------------------------------------------------------
# the predictive of one pair given block counts


def _log_pred(y, NY, NP, hyp_r, hyp_p, likelihood):
    r"""Log predictive of count ``y`` given block counts (broadcasts; seed's NB predictive).

    nb/bg: :math:`\log\mathrm{NB}(y; N^Y + r, q)`, :math:`q = p/(p N^\Phi + 1)`;
    bernoulli: :math:`\log` Bernoulli(:math:`(N^Y + a)/(N^\Phi + a + b)`).
    """
    if likelihood == "bernoulli":
        prob = (NY + hyp_r) / (NP + hyp_r + hyp_p)
        return jnp.where(y > 0, jnp.log(prob), jnp.log1p(-prob))
    a = NY + hyp_r
    q = hyp_p / (hyp_p * NP + 1.0)
    return gammaln(y + a) - gammaln(a) - gammaln(y + 1.0) + a * jnp.log1p(-q) + y * jnp.log(q)


def _log_pred_zero(NY, NP, hyp_r, hyp_p, likelihood):
    """:func:`_log_pred` at ``y = 0`` without the Gamma functions."""
    if likelihood == "bernoulli":
        return jnp.log1p(-(NY + hyp_r) / (NP + hyp_r + hyp_p))
    return (NY + hyp_r) * jnp.log1p(-hyp_p / (hyp_p * NP + 1.0))


# --------------------------------------------------------------------------------------------
# collapsed Gibbs


class GibbsState(NamedTuple):
    r"""State of :func:`collapsed_gibbs`: the indicator pair of every observed pair and the
    block counts they imply (``P`` explicit pairs, ``Z`` listed zero pairs).

    ``s``, ``r``: sender class :math:`z_{i\to j}` and receiver class :math:`z_{i\leftarrow j}`
    of each explicit pair (``(P,)`` int); ``zs``, ``zr``: the same for the listed zero pairs
    (``(Z,)``); ``n_node``: :math:`n_{ik}`, indicators drawn from :math:`\theta_i` equal to
    ``k`` (``(N, K)``); ``n_y``: :math:`n^Y_{kk'}`, summed counts per block; ``n_phi``:
    :math:`n^\Phi_{kk'}`, pairs per block (both ``(K, K)``; padding has weight 0).
    """

    s: jax.Array  # (P,) sender classes of explicit pairs
    r: jax.Array  # (P,) receiver classes
    zs: jax.Array  # (Z,) same for implicit zeros
    zr: jax.Array
    n_node: jax.Array  # (N, K)
    n_y: jax.Array  # (K, K)
    n_phi: jax.Array  # (K, K)


class GibbsInfo(NamedTuple):
    r"""Per-step diagnostics of :func:`collapsed_gibbs`: ``lp``, the collapsed log joint
    :math:`\log p(Y, Z)` of the observed pairs after the sweep, :math:`\theta` and
    :math:`\phi` integrated out (Dirichlet-multinomial times Gamma-Poisson or Beta-Bernoulli
    block terms, the :math:`-\log y!` terms included)."""

    lp: jax.Array  # log p(Y, Z) (theta, phi collapsed)


def _counts(data, s, r, zs, zr, K):
    N = _num_nodes(data)
    oh_s = jax.nn.one_hot(s, K, dtype=data.y.dtype) * data.w[:, None]
    oh_r = jax.nn.one_hot(r, K, dtype=data.y.dtype) * data.w[:, None]
    zoh_s = jax.nn.one_hot(zs, K, dtype=data.y.dtype) * data.zw[:, None]
    zoh_r = jax.nn.one_hot(zr, K, dtype=data.y.dtype) * data.zw[:, None]
    n_node = (
        segment_sum(oh_s, data.src, N)
        + segment_sum(oh_r, data.dst, N)
        + segment_sum(zoh_s, data.zsrc, N)
        + segment_sum(zoh_r, data.zdst, N)
    )
    n_phi = oh_s.T @ oh_r + zoh_s.T @ zoh_r
    n_y = (oh_s * data.y[:, None]).T @ oh_r
    return n_node, n_y, n_phi


def _gibbs_sweep(key, pairs, classes, counts, hyper, likelihood, broken):
    """One sequential sweep over ``pairs = (src, dst, y, w)``; ``classes = (s, r)``."""
    src, dst, y, w = pairs
    K = hyper.alpha.shape[0]

    def visit(carry, xs):
        n_node, n_y, n_phi = carry
        i, j, yy, ww, s, r, k = xs
        own = jnp.zeros((K, K), n_y.dtype).at[s, r].set(ww)
        ni = n_node[i] - ww * jax.nn.one_hot(s, K, dtype=n_y.dtype)
        nj = n_node[j] - ww * jax.nn.one_hot(r, K, dtype=n_y.dtype)
        if broken:  # a deliberately wrong kernel: the pair is left in its own block counts
            own = jnp.zeros_like(own)
        ny, nphi = n_y - yy * own, n_phi - own
        logits = (
            jnp.log(ni + hyper.alpha)[:, None]
            + jnp.log(nj + hyper.alpha)[None, :]
            + _log_pred(yy, ny, nphi, hyper.r, hyper.p, likelihood)
        )
        c = sample_categorical(k, logits.reshape(-1))
        s_new, r_new = c // K, c % K
        keep = ww > 0
        s_new, r_new = jnp.where(keep, s_new, s), jnp.where(keep, r_new, r)
        add = jnp.zeros((K, K), n_y.dtype).at[s_new, r_new].set(ww)
        n_node = n_node.at[i].set(ni + ww * jax.nn.one_hot(s_new, K, dtype=n_y.dtype))
        n_node = n_node.at[j].set(nj + ww * jax.nn.one_hot(r_new, K, dtype=n_y.dtype))
        if broken:
            own = jnp.zeros((K, K), n_y.dtype).at[s, r].set(ww)
        return (n_node, n_y - yy * own + yy * add, n_phi - own + add), (s_new, r_new)

    keys = jax.random.split(key, src.shape[0])
    counts, (s, r) = lax.scan(visit, counts, (src, dst, y, w, *classes, keys))
    return (s, r), counts


def _log_dirichlet_multinomial(counts, alpha):
    return (
        gammaln(alpha.sum())
        - gammaln(alpha.sum() + counts.sum(-1))
        + jnp.sum(gammaln(alpha + counts) - gammaln(alpha), -1)
    )


def _collapsed_lp(data, hyper, n_node, n_y, n_phi, likelihood):
    """log p(Y, Z) with theta and phi integrated out (nb: the -log y! terms included)."""
    lp = jnp.sum(_log_dirichlet_multinomial(n_node, hyper.alpha))
    if likelihood == "bernoulli":
        a, b = hyper.r, hyper.p
        lp += jnp.sum(
            gammaln(a + b)
            - gammaln(a)
            - gammaln(b)
            + gammaln(a + n_y)
            + gammaln(b + n_phi - n_y)
            - gammaln(a + b + n_phi)
        )
    else:
        r, theta = hyper.r, hyper.p / (1 - hyper.p)
        lp += jnp.sum(
            gammaln(r + n_y)
            - gammaln(r)
            + n_y * jnp.log(theta / (n_phi * theta + 1))
            - r * jnp.log1p(n_phi * theta)
        )
        lp -= jnp.sum(data.w * gammaln(data.y + 1))
    return lp


def _gibbs_step(data, hyper, key, state, *, likelihood, broken):
    k1, k2 = jax.random.split(key)
    counts = (state.n_node, state.n_y, state.n_phi)
    (s, r), counts = _gibbs_sweep(
        k1,
        (data.src, data.dst, data.y, data.w),
        (state.s, state.r),
        counts,
        hyper,
        likelihood,
        broken,
    )
    zeros = jnp.zeros_like(data.zw)
    (zs, zr), counts = _gibbs_sweep(
        k2,
        (data.zsrc, data.zdst, zeros, data.zw),
        (state.zs, state.zr),
        counts,
        hyper,
        likelihood,
        broken,
    )
    new = GibbsState(s, r, zs, zr, *counts)
    return new, GibbsInfo(_collapsed_lp(data, hyper, *counts, likelihood))


def prior_sample(key, data: WMMSBData, hyper: WMMSBHyper) -> GibbsState:
    """Draw ``theta_i ~ Dir(alpha)`` and every pair's indicators (theta then discarded)."""
    N, K = _num_nodes(data), hyper.alpha.shape[0]
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    log_theta = jnp.log(jax.random.dirichlet(k1, hyper.alpha, (N,)))
    s = sample_categorical(k2, log_theta[data.src])
    r = sample_categorical(k3, log_theta[data.dst])
    zs = sample_categorical(k4, log_theta[data.zsrc])
    zr = sample_categorical(k5, log_theta[data.zdst])
    return GibbsState(s, r, zs, zr, *_counts(data, s, r, zs, zr, K))


def data_sample(key, state: GibbsState, data: WMMSBData, hyper: WMMSBHyper, likelihood="nb"):
    """Draw the explicit pairs' ``y`` given the indicators: ``phi`` from its prior, then
    ``y ~ Poisson(phi[s, r])`` (bernoulli: ``phi ~ Beta(a, b)``, ``y ~ Bernoulli``). With
    ``phi`` independent of ``z`` a priori this is an exact draw from ``p(y | z)``."""
    _check_likelihood(likelihood)
    K = hyper.alpha.shape[0]
    k1, k2 = jax.random.split(key)
    if likelihood == "bernoulli":
        phi = jax.random.beta(k1, hyper.r, hyper.p, (K, K))
        y = jax.random.bernoulli(k2, phi[state.s, state.r]).astype(data.y.dtype)
    else:
        phi = jax.random.gamma(k1, hyper.r, (K, K)) * hyper.p / (1 - hyper.p)
        y = jax.random.poisson(k2, phi[state.s, state.r]).astype(data.y.dtype)
    return data._replace(y=y * data.w)


def gibbs_refresh(data, state: GibbsState, K: int) -> GibbsState:
    """Recompute the block counts after the data were redrawn (Geweke ``refresh``)."""
    return state._replace(
        **dict(
            zip(
                ("n_node", "n_y", "n_phi"),
                _counts(data, state.s, state.r, state.zs, state.zr, K),
                strict=True,
            )
        )
    )


def _gibbs_init(data, hyper, key):
    return gibbs_refresh(data, prior_sample(key, data, hyper), hyper.alpha.shape[0])


def collapsed_gibbs(
    data: WMMSBData,
    hyper: WMMSBHyper,
    *,
    likelihood: str = "nb",
    _broken: bool = False,
) -> SamplingAlgorithm:
    """Collapsed Gibbs sampler (module docstring; seed 003, the conditional stated after
    ``eq1``).
    ``likelihood`` is "nb" (WMMSB with fixed r, p) or "bernoulli" (MMSB). ``_broken`` is a
    deliberately wrong kernel for the Geweke test (the pair stays in its own block counts)."""
    if not isinstance(likelihood, str) or likelihood not in ("nb", "bernoulli"):
        raise ValueError(
            f"likelihood must be 'nb' or 'bernoulli' for collapsed Gibbs, got {likelihood!r}"
        )
    _check_common(data, hyper, likelihood)
    if data.zmask.shape[0]:
        raise ValueError("data: collapsed Gibbs needs the observed zeros listed (zeros='list')")
    _check_zeros_held(data, "collapsed Gibbs")
    static = dict(likelihood=likelihood, broken=bool(_broken))
    return SamplingAlgorithm(
        init=bind(_gibbs_init, data, hyper),
        step=bind(_gibbs_step, data, hyper, **static),
        trace=_gibbs_trace,
        spec=ArvizSpec(
            name=f"wmmsb.collapsed_gibbs.{likelihood}",
            dims={"theta": ["node", "class"], "block": ["class", "class2"]},
            settings=static,
        ),
    )


def _gibbs_trace(state, info):
    return {
        "posterior": {"n_node": state.n_node, "n_y": state.n_y, "n_phi": state.n_phi},
        "sample_stats": {"lp": info.lp},
    }


# --------------------------------------------------------------------------------------------
# CVB0


class CVB0State(NamedTuple):
    r"""State of :func:`cvb0`: the variational joints and their expected counts.

    ``gamma``: :math:`\gamma_{ijkk'}` of each explicit pair (``(P, K, K)``; ``(0, K, K)``
    with ``store_gamma=False``); ``zgamma``: the same for the listed zero pairs; ``n_node``:
    :math:`N_{ik}`, expected indicators of node ``i`` in class ``k`` (``(N, K)``); ``n_y``:
    :math:`N^Y_{kk'}`, expected summed counts per block; ``n_phi``: :math:`N^\Phi_{kk'}`,
    expected pairs per block; ``r``, ``p``: the NB parameters per block (``(K, K)``; the fixed
    hyperparameters for nb/bernoulli, :math:`E_q[r_{kk'}]` and :math:`E_q[p_{kk'}]` for bg).
    """

    gamma: jax.Array  # (P, K, K) explicit pairs (or (0, K, K) when not stored)
    zgamma: jax.Array  # (Z, K, K) zero pairs (or (0, K, K))
    n_node: jax.Array  # (N, K)
    n_y: jax.Array  # (K, K)
    n_phi: jax.Array  # (K, K)
    r: jax.Array  # (K, K) r or E_q[r] (bg)
    p: jax.Array  # (K, K) p or E_q[p] (bg)


class CVB0Info(NamedTuple):
    """Per-step diagnostics of :func:`cvb0`: ``loglik``, the mean training log predictive
    per observed pair under the statistics the step started from; ``lp``, the same summed
    over the observed pairs."""

    loglik: jax.Array  # mean training log predictive per observed pair (before the update)
    lp: jax.Array  # the same, summed (the objective the driver reports)


def _log_theta(n_node, alpha):
    a = n_node + alpha
    return jnp.log(a) - jnp.log(a.sum(-1, keepdims=True))


def _pair_chunks(arrays, chunk):
    P = arrays[0].shape[0]
    n = -(-P // chunk)
    out = []
    for a in arrays:
        pad = n * chunk - P
        a = jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)]) if pad else a
        out.append(a.reshape((n, chunk, *a.shape[1:])))
    return out, P


def _gamma_pass(pairs, old_gamma, stats, hyper, likelihood, chunk, zero, ymax=None):
    """New gamma for every pair of ``pairs = (src, dst, y, w)`` from ``stats`` (synchronous
    CVB0); returns (new gamma or None, new statistics, log predictive sum). With ``ymax``
    (static, the largest count) the predictive under the inclusive counts is tabulated once
    per count value (``(ymax + 1) x K^2`` Gamma functions instead of ``pairs x K^2``)."""
    n_node, n_y, n_phi, hr, hp = stats
    table = None
    if ymax is not None and not zero:
        values = jnp.arange(ymax + 1, dtype=n_y.dtype)[:, None, None]
        table = _log_pred(values, n_y, n_phi, hr, hp, likelihood)
    _N, K = n_node.shape
    store = old_gamma is not None
    arrays = list(pairs) + ([old_gamma] if store else [])
    chunks, P = _pair_chunks(arrays, chunk)
    log_theta = _log_theta(n_node, hyper.alpha)
    base0 = _log_pred_zero(n_y, n_phi, hr, hp, likelihood)

    def body(acc, xs):
        nn, ny, nphi, ll = acc
        i, j, y, w = xs[:4]
        ai, aj = n_node[i], n_node[j]
        # training log predictive of the current model (inclusive counts)
        if zero:
            lpred = jnp.broadcast_to(base0, (i.shape[0], K, K))
        elif table is not None:
            lpred = table[y.astype(jnp.int32)]
        else:
            lpred = _log_pred(y[:, None, None], n_y, n_phi, hr, hp, likelihood)
        joint = log_theta[i][:, :, None] + log_theta[j][:, None, :] + lpred
        ll = ll + jnp.sum(w * jax.nn.logsumexp(joint, axis=(1, 2)))
        if store:
            g = xs[4] * w[:, None, None]
            ai = ai - g.sum(2)
            aj = aj - g.sum(1)
            yy = y[:, None, None]
            lpred = (
                _log_pred_zero(n_y - yy * g, n_phi - g, hr, hp, likelihood)
                if zero
                else _log_pred(yy, n_y - yy * g, n_phi - g, hr, hp, likelihood)
            )
        logits = jnp.log(ai + hyper.alpha)[:, :, None] + jnp.log(aj + hyper.alpha)[:, None, :]
        logits = logits + lpred
        gam = jax.nn.softmax(logits.reshape(-1, K * K), axis=-1).reshape(-1, K, K)
        gw = gam * w[:, None, None]
        nn = nn.at[i].add(gw.sum(2)).at[j].add(gw.sum(1))
        ny = ny + jnp.einsum("p,pkl->kl", y, gw)
        nphi = nphi + gw.sum(0)
        return (nn, ny, nphi, ll), (gam if store else None)

    zeros = (jnp.zeros_like(n_node), jnp.zeros_like(n_y), jnp.zeros_like(n_phi))
    (nn, ny, nphi, ll), gam = lax.scan(body, (*zeros, jnp.zeros((), n_y.dtype)), chunks)
    if store:
        gam = gam.reshape((-1, K, K))[:P]
    return gam, (nn, ny, nphi), ll


def _dense_zero_pass(zmask, stats, hyper, likelihood):
    r"""The CVB0 pass over the observed zeros held as a dense ``N x N`` mask ``W``, counts
    inclusive (no self-exclusion). With :math:`\hat\theta_i \propto N_i + \alpha` and
    :math:`E_{kk'} = \mathrm{pred}(0 \mid N^Y_{kk'}, N^\Phi_{kk'})`, every zero pair has
    :math:`\gamma_{ij} = \hat\theta_i \hat\theta_j^\top \circ E / Z_{ij}` with
    :math:`Z = \hat\Theta E \hat\Theta^\top`, so with :math:`R = W / Z` the new statistics
    are matrix products, ``O(N^2 K)`` instead of ``O(N^2 K^2)``:
    sender rows :math:`\hat\Theta \circ (R \hat\Theta E^\top)`, receiver rows
    :math:`\hat\Theta \circ (R^\top \hat\Theta E)`,
    :math:`N^\Phi \mathrel{+}= E \circ (\hat\Theta^\top R \hat\Theta)`; the training
    log-likelihood of the zeros is :math:`\sum W \log Z`."""
    n_node, n_y, n_phi, hr, hp = stats
    theta = jnp.exp(_log_theta(n_node, hyper.alpha))
    E = jnp.exp(_log_pred_zero(n_y, n_phi, hr, hp, likelihood))
    Z = theta @ E @ theta.T
    R = zmask / Z
    nn = theta * (R @ (theta @ E.T)) + theta * (R.T @ (theta @ E))
    nphi = E * (theta.T @ R @ theta)
    ll = jnp.sum(zmask * jnp.log(Z))
    return (nn, jnp.zeros_like(n_y), nphi), ll


def _bg_update(n_y, n_phi, p_old, hyper):
    """Seed's closed forms: E_q[r] (eq:update2 times a) then the mean of q(p)."""
    er = (hyper.r0 * hyper.c0 + n_y) / (hyper.c0 - n_phi * jnp.log1p(-p_old))
    a = hyper.c * hyper.eps + n_y
    b = hyper.c * (1 - hyper.eps) + n_phi * er
    return er, a / (a + b)


def _cvb0_step(data, hyper, key, state, *, likelihood, chunk, store, ymax=None, init=None):
    del key, init
    stats = (state.n_node, state.n_y, state.n_phi, state.r, state.p)
    explicit = (data.src, data.dst, data.y, data.w)
    zpairs = (data.zsrc, data.zdst, jnp.zeros_like(data.zw), data.zw)
    g1, s1, ll1 = _gamma_pass(
        explicit, state.gamma if store else None, stats, hyper, likelihood, chunk, False, ymax
    )
    g2, s2, ll2 = _gamma_pass(
        zpairs, state.zgamma if store else None, stats, hyper, likelihood, chunk, True
    )
    n_node, n_y, n_phi = (a + b for a, b in zip(s1, s2, strict=True))
    count = jnp.sum(data.w) + jnp.sum(data.zw)
    if data.zmask.shape[0]:
        s3, ll3 = _dense_zero_pass(data.zmask, stats, hyper, likelihood)
        n_node, n_y, n_phi = (a + b for a, b in zip((n_node, n_y, n_phi), s3, strict=True))
        ll2 = ll2 + ll3
        count = count + jnp.sum(data.zmask)
    r, p = state.r, state.p
    if likelihood == "bg":
        r, p = _bg_update(n_y, n_phi, p, hyper)
    new = CVB0State(
        g1 if store else state.gamma, g2 if store else state.zgamma, n_node, n_y, n_phi, r, p
    )
    total = ll1 + ll2
    return new, CVB0Info(total / count, total)


def _cvb0_init(data, hyper, key, *, likelihood, chunk, store, ymax=None, init="assortative"):
    """Initial gamma: ``theta_i ⊗ theta_j`` for per-node ``theta ~ Dir(1)`` (node-specific
    starting memberships break the label symmetry much faster than per-pair noise); with
    ``init="assortative"`` times ``1 + 9 [k = k']`` renormalised for the pairs with ``y > 0``
    (the block statistics differ from the first pass, which MMSB's nearly flat Bernoulli
    predictive otherwise takes hundreds of passes to achieve); and its statistics."""
    del chunk
    tilt_size = 9.0 if init == "assortative" else 0.0
    K = hyper.alpha.shape[0]
    N = _num_nodes(data)
    dtype = data.y.dtype
    theta = jax.random.dirichlet(key, jnp.ones(K, dtype), (N,))
    tilt = 1.0 + tilt_size * jnp.eye(K, dtype=dtype) * (data.y > 0)[:, None, None]
    g = theta[data.src][:, :, None] * theta[data.dst][:, None, :] * tilt
    g = g / g.sum((1, 2), keepdims=True) * data.w[:, None, None]
    zs = theta[data.zsrc] * data.zw[:, None]
    n_node = (
        segment_sum(g.sum(2), data.src, N)
        + segment_sum(g.sum(1), data.dst, N)
        + segment_sum(zs, data.zsrc, N)
        + segment_sum(theta[data.zdst] * data.zw[:, None], data.zdst, N)
    )
    n_y = jnp.einsum("p,pkl->kl", data.y, g)
    n_phi = g.sum(0) + zs.T @ theta[data.zdst]
    if data.zmask.shape[0]:
        W = data.zmask
        n_node = n_node + theta * W.sum(1)[:, None] + theta * W.sum(0)[:, None]
        n_phi = n_phi + theta.T @ W @ theta
    r = jnp.full((K, K), hyper.r, dtype)
    p = jnp.full((K, K), hyper.p, dtype)
    if likelihood == "bg":
        p = jnp.full((K, K), hyper.eps, dtype)
        r, p = _bg_update(n_y, n_phi, p, hyper)
    empty = jnp.zeros((0, K, K), dtype)
    if store:
        zg = zs[:, :, None] * theta[data.zdst][:, None, :]
    return CVB0State(g if store else empty, zg if store else empty, n_node, n_y, n_phi, r, p)


def _cvb0_trace(state, info):
    return {
        "posterior": {},
        "sample_stats": {"loglik": info.loglik, "lp": info.lp},
    }


def _check_zeros_held(data, method):
    """Full-batch methods must see every observed zero (listed, or dense for CVB0)."""
    num_zeros = concrete_or_none(data.num_zeros)
    listed = data.zsrc.shape[0] + (concrete_or_none(data.zmask.sum()) or 0.0)
    if num_zeros is not None and float(num_zeros) > float(listed):
        raise ValueError(
            f"data: {method} needs the observed zeros listed (make_network(..., zeros='list'"
            f"{'' if method == 'collapsed Gibbs' else ' or dense'}))"
        )


def _check_common(data, hyper, likelihood):
    """Types of ``data``/``hyper``, the likelihood name and (bernoulli) 0/1 links. The 0/1
    check reads ``data.y`` on the host; it is skipped while ``data`` is traced (the Geweke
    harness builds the kernel inside compiled code from data it drew itself)."""
    if not isinstance(data, WMMSBData):
        raise ValueError("data must come from bnpjax.models.wmmsb.make_data or make_network")
    if not isinstance(hyper, WMMSBHyper):
        raise ValueError("hyper must come from bnpjax.models.wmmsb.make_hyper")
    _check_likelihood(likelihood)
    y_host = concrete_or_none(data.y)
    if likelihood == "bernoulli" and y_host is not None and np.any(y_host > 1):
        raise ValueError("data: the bernoulli likelihood needs 0/1 links (binarise y first)")


def cvb0(
    data: WMMSBData,
    hyper: WMMSBHyper,
    *,
    likelihood: str = "nb",
    store_gamma: bool = True,
    chunk: int = 4096,
    max_count: int | None = None,
    init: str = "assortative",
) -> SamplingAlgorithm:
    """Synchronous collapsed variational Bayes (CVB0) as a driver step (module docstring).

    Each step is one full pass: every pair's :math:`\\gamma_{ij}` from the previous
    statistics (seed 003, zero-order form of ``eq1``; ``bg``: the Beta-Gamma updates after
    the pass). ``info.loglik`` is the mean training log predictive per observed pair under the
    statistics the step started from. ``store_gamma`` keeps ``gamma`` for the exact "-ij"
    counts (memory ``pairs x K^2``). ``max_count`` sizes the table of the link predictive
    per count value (default: the largest count rounded up to a power of 2; pass the same value
    for fits on subsets of one network to share one compilation). ``init``: "assortative"
    (default) or "random" starting gamma (see ``_cvb0_init``); CVB0 finds a local optimum,
    so compare the final training log-likelihoods of several starts when it matters."""
    _check_common(data, hyper, likelihood)
    if init not in ("assortative", "random"):
        raise ValueError(f"init must be 'assortative' or 'random', got {init!r}")
    _check_zeros_held(data, "CVB0")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
    y_host = concrete_or_none(data.y)  # None while traced (Geweke): no table then
    ymax = None
    if y_host is not None and y_host.size:
        top = float(y_host.max())
        if max_count is not None and max_count >= top:
            ymax = int(max_count)
        elif top <= 65536:
            ymax = 2 ** int(np.ceil(np.log2(max(top, 1.0))))  # rounded up: fewer recompiles
    static = dict(
        likelihood=likelihood, chunk=int(chunk), store=bool(store_gamma), ymax=ymax, init=init
    )
    return SamplingAlgorithm(
        init=bind(_cvb0_init, data, hyper, **static),
        step=bind(_cvb0_step, data, hyper, **static),
        trace=_cvb0_trace,
        spec=ArvizSpec(name=f"wmmsb.cvb0.{likelihood}", settings=static),
    )


# --------------------------------------------------------------------------------------------
# stochastic CVB0


class SCVB0State(NamedTuple):
    r"""State of :func:`scvb0`: running estimates of the CVB0 statistics and the plateau stop.

    ``n_node``: :math:`N_{ik}` (``(N, K)``); ``visits``: how many times each node's row was
    updated (``(N,)``, the node step-size counter); ``n_y``, ``n_phi``: :math:`N^Y_{kk'}`,
    :math:`N^\Phi_{kk'}` (``(K, K)``); ``r``, ``p``: NB parameters per block (fixed, or
    :math:`E_q[r]`, :math:`E_q[p]` for bg); ``t``: global step counter; ``best``: best
    validation log-likelihood so far; ``stall``: evaluations without improvement by ``tol``;
    ``done``: plateau reached (later steps are no-ops); ``valid``: the last validation
    log-likelihood (``-inf`` before the first evaluation).
    """

    n_node: jax.Array  # (N, K)
    visits: jax.Array  # (N,) times each node's row was updated
    n_y: jax.Array
    n_phi: jax.Array
    r: jax.Array
    p: jax.Array
    t: jax.Array  # global step counter
    best: jax.Array  # best validation log-likelihood so far
    stall: jax.Array  # evaluations without improvement
    done: jax.Array  # plateau reached: later steps are no-ops
    valid: jax.Array  # last validation log-likelihood


class SCVB0Info(NamedTuple):
    """Per-step diagnostics of :func:`scvb0`: ``valid_loglik``, the last validation mean log
    predictive; ``rho``, the global step size used (0 once done); ``done``, the plateau flag.
    """

    valid_loglik: jax.Array
    rho: jax.Array
    done: jax.Array


def _gamma_batch(n_node, stats, hyper, i, j, y, likelihood):
    """gamma for a batch of pairs from inclusive statistics (no self-exclusion)."""
    n_y, n_phi, hr, hp = stats
    logits = (
        jnp.log(n_node[i] + hyper.alpha)[..., :, None]
        + jnp.log(n_node[j] + hyper.alpha)[..., None, :]
        + _log_pred(y[..., None, None], n_y, n_phi, hr, hp, likelihood)
    )
    shape = logits.shape
    return jax.nn.softmax(logits.reshape((*shape[:-2], -1)), -1).reshape(shape)


def _scvb0_step(
    data,
    hyper,
    valid,
    key,
    state,
    *,
    likelihood,
    batch,
    draws,
    max_degree,
    schedule,
    kappa_node,
    eval_every,
    patience,
    tol,
):
    N = _num_nodes(data)
    dtype = data.y.dtype
    k_nodes, k_partner, k_dir, k_links = jax.random.split(key, 4)

    def update(state):
        nodes = jax.random.choice(k_nodes, N, (batch,), replace=False)
        # the explicit pairs (links) of each node: all of them when the node has at most
        # max_degree, else max_degree drawn uniformly with replacement, weight degree/max_degree
        start = data.adj_ptr[nodes]
        deg = data.adj_ptr[nodes + 1] - start
        slot = jnp.arange(max_degree)
        big = deg > max_degree
        drawn = jnp.floor(
            jax.random.uniform(k_links, (batch, max_degree), dtype) * deg[:, None]
        ).astype(jnp.int32)
        offset = jnp.where(big[:, None], jnp.minimum(drawn, deg[:, None] - 1), slot[None, :])
        valid_slot = big[:, None] | (slot[None, :] < deg[:, None])
        pid = data.adj[jnp.clip(start[:, None] + offset, 0, data.adj.shape[0] - 1)]
        li, lj, ly = data.src[pid], data.dst[pid], data.y[pid]
        factor = jnp.where(big, deg / max_degree, 1.0).astype(dtype)[:, None]
        lw = jnp.where(valid_slot, data.w[pid] * factor, 0.0).astype(dtype)
        # draws of zero partners
        other = jax.random.randint(k_partner, (batch, draws), 0, N - 1)
        other = other + (other >= nodes[:, None])
        out = jax.random.bernoulli(k_dir, 0.5, (batch, draws)) | ~data.directed
        me = jnp.broadcast_to(nodes[:, None], other.shape)
        zi = jnp.where(out, me, other)
        zj = jnp.where(out, other, me)
        zi, zj = (
            jnp.where(data.directed, zi, jnp.minimum(zi, zj)),
            jnp.where(data.directed, zj, jnp.maximum(me, other)),
        )
        key_ = zi * N + zj
        pos = jnp.clip(jnp.searchsorted(data.special, key_), 0, data.special.shape[0] - 1)
        is_special = (data.special.shape[0] > 0) & (data.special[pos] == key_)
        zobs = (~is_special) & (hash_uniform(key_, data.seed) < data.keep)
        zobs = zobs.astype(dtype)
        stats = (state.n_y, state.n_phi, state.r, state.p)
        gl = _gamma_batch(state.n_node, stats, hyper, li, lj, ly, likelihood)
        gz = _gamma_batch(state.n_node, stats, hyper, zi, zj, jnp.zeros_like(zobs), likelihood)
        pairs_n = jnp.where(data.directed, N * (N - 1.0), N * (N - 1.0) / 2)
        wz_global = pairs_n / (batch * draws) * zobs
        wl_global = N / (2.0 * batch) * lw
        n_y_hat = jnp.einsum("bd,bd,bdkl->kl", wl_global, ly, gl)
        n_phi_hat = jnp.einsum("bd,bdkl->kl", wl_global, gl) + jnp.einsum(
            "bd,bdkl->kl", wz_global, gz
        )
        rho = jnp.asarray(schedule(state.t), dtype)
        n_y = (1 - rho) * state.n_y + rho * n_y_hat
        n_phi = (1 - rho) * state.n_phi + rho * n_phi_hat
        # node rows: the node's own role in each of its pairs
        l_role = jnp.where((li == nodes[:, None])[..., None], gl.sum(-1), gl.sum(-2))
        z_role = jnp.where((zi == nodes[:, None])[..., None], gz.sum(-1), gz.sum(-2))
        scale = jnp.where(data.directed, 2.0 * (N - 1), N - 1.0) / draws
        row_hat = jnp.einsum("bd,bdk->bk", lw, l_role) + scale * jnp.einsum(
            "bd,bdk->bk", zobs, z_role
        )
        rho_n = (1.0 + state.visits[nodes]) ** (-kappa_node)
        rows = (1 - rho_n[:, None]) * state.n_node[nodes] + rho_n[:, None] * row_hat
        n_node = state.n_node.at[nodes].set(rows.astype(dtype))
        r, p = state.r, state.p
        if likelihood == "bg":
            r, p = _bg_update(n_y, n_phi, p, hyper)
        state = state._replace(
            n_node=n_node,
            visits=state.visits.at[nodes].add(1),
            n_y=n_y,
            n_phi=n_phi,
            r=r,
            p=p,
            t=state.t + 1,
        )
        evaluate = (state.t % eval_every) == 0
        ll = lax.cond(
            evaluate,
            lambda s: mean_log_predictive(
                valid, s.n_node, s.n_y, s.n_phi, s.r, s.p, hyper, likelihood
            ),
            lambda s: s.valid,
            state,
        )
        improved = ~jnp.isfinite(state.best) | (ll > state.best + tol * jnp.abs(state.best))
        stall = jnp.where(evaluate, jnp.where(improved, 0, state.stall + 1), state.stall)
        best = jnp.where(evaluate & improved, ll, state.best)
        done = stall >= patience
        return state._replace(best=best, stall=stall, done=done, valid=ll), rho

    new, rho = lax.cond(state.done, lambda s: (s, jnp.zeros((), dtype)), update, state)
    return new, SCVB0Info(new.valid, rho, new.done)


def mean_log_predictive(pairs, n_node, n_y, n_phi, r, p, hyper, likelihood) -> jax.Array:
    """Mean over ``pairs = (src, dst, y, w)`` of :math:`\\log \\sum_{kk'} \\hat\\theta_{ik}
    \\hat\\theta_{jk'} \\mathrm{pred}(y_{ij} | N^Y_{kk'}, N^\\Phi_{kk'})` with
    :math:`\\hat\\theta_i \\propto N_i + \\alpha` (the validation / test log-likelihood)."""
    _check_likelihood(likelihood)
    i, j, y, w = pairs
    lt = _log_theta(n_node, hyper.alpha)
    lpred = _log_pred(y[:, None, None], n_y, n_phi, r, p, likelihood)
    joint = lt[i][:, :, None] + lt[j][:, None, :] + lpred
    return jnp.sum(w * jax.nn.logsumexp(joint, axis=(1, 2))) / jnp.maximum(jnp.sum(w), 1.0)


def link_probability(src, dst, n_node, n_y, n_phi, r, p, hyper, likelihood="nb"):
    """Posterior predictive :math:`P(y_{ij} > 0)` of pairs (the AUC score):
    :math:`1 - \\sum_{kk'} \\hat\\theta_{ik}\\hat\\theta_{jk'} \\mathrm{pred}(0 | \\cdot)`.

    Math: seed ``003_e1e629acb32e903e.txt``, the collapsed Gibbs conditional stated after
    ``eq1`` (in its expected-count form, the Taylor-expanded update below it): the factors
    :math:`(N_{ik} + \\alpha_k)` normalised give :math:`\\hat\\theta_i` (:func:`memberships`)
    and :math:`\\mathrm{pred}(0 | \\cdot) = \\mathrm{NB}(0; N^Y_{kk'} + r, p / (p N^\\Phi_{kk'} +
    1))` (bg: with :math:`E_q[r], E_q[p]`, the seed's Beta-Gamma form of the update;
    bernoulli: the Beta-Bernoulli predictive of the module docstring, not in the seed)."""
    _check_likelihood(likelihood)
    lt = _log_theta(n_node, hyper.alpha)
    p0 = jnp.exp(_log_pred_zero(n_y, n_phi, r, p, likelihood))
    th = jnp.exp(lt)
    return 1.0 - jnp.einsum("pk,kl,pl->p", th[src], p0, th[dst])


def memberships(n_node, hyper) -> jax.Array:
    r"""Posterior mean memberships :math:`E[\theta_i] = (N_i + \alpha) / \sum_k (N_{ik} +
    \alpha_k)` (Dirichlet posterior given the expected counts).

    Math: seed ``003_e1e629acb32e903e.txt``, the membership factor
    :math:`(n^\Theta_{\rightarrow ik} + \alpha_k)` of the collapsed Gibbs conditional stated
    after ``eq1`` (the Dirichlet-multinomial predictive of a new indicator of node ``i``), with
    the counts replaced by their expectations :math:`N_{ik}` as in the Taylor-expanded CVB0
    update below it."""
    return jnp.exp(_log_theta(n_node, hyper.alpha))


def block_means(n_y, n_phi, r, p, likelihood="nb") -> jax.Array:
    r"""Posterior mean block rates given the expected counts: nb/bg
    :math:`E[\phi_{kk'}] = (r + N^Y) \frac{s}{N^\Phi s + 1}`, :math:`s = p/(1-p)`
    (Gamma-Poisson); bernoulli :math:`(N^Y + a)/(N^\Phi + a + b)` (Beta-Bernoulli).

    Math: seed ``003_e1e629acb32e903e.txt``, the NB predictive
    :math:`\mathrm{NB}(y; N^Y_{kk'} + r, p / (p N^\Phi_{kk'} + 1))` of the collapsed Gibbs
    conditional stated after ``eq1`` (expected-count form below it) is the Poisson mixed over
    the Gamma posterior of :math:`\phi_{kk'}`, whose mean is returned here (equal to the NB
    mean). For bg pass :math:`E_q[r], E_q[p]` (``eq:update2`` and the Beta :math:`q(p)`); the
    bernoulli form is the module docstring's Beta-Bernoulli MMSB, not in the seed."""
    _check_likelihood(likelihood)
    if likelihood == "bernoulli":
        return (n_y + r) / (n_phi + r + p)
    scale = p / (1 - p)
    return (r + n_y) * scale / (n_phi * scale + 1)


def log_likelihood(data: WMMSBData, n_node, n_y, n_phi, r, p, hyper, likelihood="nb"):
    """Pointwise log predictive of the explicit pairs (see :func:`mean_log_predictive`)."""
    _check_likelihood(likelihood)
    lt = _log_theta(n_node, hyper.alpha)
    lpred = _log_pred(data.y[:, None, None], n_y, n_phi, r, p, likelihood)
    joint = lt[data.src][:, :, None] + lt[data.dst][:, None, :] + lpred
    return jax.nn.logsumexp(joint, axis=(1, 2))


def _scvb0_init(data, hyper, valid, key, *, likelihood):
    N, K = _num_nodes(data), hyper.alpha.shape[0]
    dtype = data.y.dtype
    k1, k2 = jax.random.split(key)
    total_pairs = jnp.sum(data.w) + data.num_zeros
    per_node = 2 * total_pairs / N
    n_node = jax.random.dirichlet(k1, jnp.ones(K, dtype), (N,)) * per_node
    mix = jax.random.dirichlet(k2, jnp.ones(K * K, dtype)).reshape(K, K)
    n_phi = mix * total_pairs
    n_y = mix * jnp.sum(data.w * data.y)
    r = jnp.full((K, K), hyper.r, dtype)
    p = jnp.full((K, K), hyper.p, dtype)
    if likelihood == "bg":
        r, p = _bg_update(n_y, n_phi, jnp.full((K, K), hyper.eps, dtype), hyper)
    minus_inf = jnp.asarray(-jnp.inf, dtype)
    return SCVB0State(
        n_node.astype(dtype),
        jnp.zeros(N, dtype),
        n_y,
        n_phi,
        r,
        p,
        jnp.zeros((), jnp.int32),
        minus_inf,
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        minus_inf,
    )


def _scvb0_trace(state, info):
    return {
        "posterior": {},
        "sample_stats": {"valid_loglik": info.valid_loglik, "rho": info.rho, "done": info.done},
    }


class _Schedule:
    """:math:`\\rho_t = (\\tau + t)^{-\\kappa}`, an optax ``Schedule`` (a callable of the step
    count); hashable so that the same (tau, kappa) hits the driver's compile cache."""

    def __init__(self, tau, kappa):
        self.tau, self.kappa = float(tau), float(kappa)

    def __call__(self, count):
        return (self.tau + count) ** (-self.kappa)

    def __eq__(self, other):
        return isinstance(other, _Schedule) and (self.tau, self.kappa) == (other.tau, other.kappa)

    def __hash__(self):
        return hash((self.tau, self.kappa))


def _check_valid(valid, n_nodes, likelihood):
    """Validation pairs ``(src, dst, y)`` for :func:`scvb0` as host arrays, or ValueError."""
    try:
        parts = tuple(valid)
    except TypeError:
        parts = ()
    if len(parts) != 3:
        raise ValueError("valid must be a tuple (src, dst, y) of validation pairs")
    vs = _int_array("valid src", parts[0])
    vd = _int_array("valid dst", parts[1], vs.shape[0])
    vy = _int_array("valid y", parts[2], vs.shape[0])
    if vs.shape[0] == 0:
        raise ValueError("valid must hold at least one pair")
    for name, ids in (("valid src", vs), ("valid dst", vd)):
        if np.any(ids != np.round(ids)) or np.any(ids < 0) or np.any(ids >= n_nodes):
            raise ValueError(f"{name} holds node ids outside 0..{n_nodes - 1} or non-integers")
    if np.any(vs == vd):
        raise ValueError("valid src/dst: self-loops are excluded from the model")
    _check_counts("valid y", vy, likelihood)
    return vs, vd, vy


def scvb0(
    data: WMMSBData,
    hyper: WMMSBHyper,
    *,
    likelihood: str = "bg",
    valid=None,
    batch: int = 32,
    draws: int = 64,
    links_per_node: int = 128,
    tau: float = 1024.0,
    kappa: float = 0.5,
    schedule: Callable | None = None,
    kappa_node: float = 0.5,
    eval_every: int = 100,
    patience: int = 3,
    tol: float = 1e-4,
) -> SamplingAlgorithm:
    """Stochastic CVB0 (module docstring) as a driver step.

    ``valid``: validation pairs ``(src, dst, y)`` for the plateau stop (default: a fixed
    sample of the explicit pairs is *not* used; without ``valid`` the run never stops early).
    ``batch`` nodes per step, ``draws`` zero-partner draws per node, at most
    ``links_per_node`` of a node's links (a uniform draw, reweighted, above); ``schedule`` (an
    optax schedule, default :math:`\\rho_t = (\\tau + t)^{-\\kappa}`, ``t = 0, 1, ...``) gives
    the global step size: ``tau >= 1`` (so that every :math:`\\rho_t \\le 1`) and ``kappa`` in
    ``[0.5, 1]`` (Robbins-Monro needs :math:`\\sum \\rho_t = \\infty`, i.e. ``kappa <= 1``, and
    ``kappa > 0.5`` for :math:`\\sum \\rho_t^2 < \\infty`; 0.5, the thesis value and the
    default, is allowed). ``kappa_node`` in ``[0, 1]`` sets the node rows' step
    :math:`(1 + t_i)^{-\\kappa_{node}}` (0: each visited row is replaced by its estimate).
    ``tol >= 0`` is the relative improvement the plateau stop asks for.

    Math: seed ``003_e1e629acb32e903e.txt``; each batch pair's :math:`\\gamma_{ijkk'}` is the
    zero-order (CVB0) form of ``eq1`` with inclusive counts (the NB predictive of the
    collapsed Gibbs conditional stated after ``eq1``), and ``likelihood="bg"`` applies the
    Beta-Gamma closed forms (``eq:update2`` for :math:`E_q[r_{kk'}]`, then the Beta
    :math:`q(p_{kk'})`) after each step. The stochastic averaging itself (minibatches,
    reweighting, step sizes) is not in the seed: it follows Foulds et al. (2013), as the
    module docstring describes."""
    _check_common(data, hyper, likelihood)
    N = _num_nodes(data)
    for name, value in (
        ("batch", batch),
        ("draws", draws),
        ("eval_every", eval_every),
        ("patience", patience),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if batch > N:
        raise ValueError(f"batch must be at most the number of nodes {N}, got {batch}")
    checks = (
        ("tau", tau, 1.0, np.inf, "a number >= 1 (rho_0 = tau**-kappa must be at most 1)"),
        ("kappa", kappa, 0.5, 1.0, "in [0.5, 1] (Robbins-Monro step-size exponent)"),
        ("kappa_node", kappa_node, 0.0, 1.0, "in [0, 1] (node step-size exponent)"),
        ("tol", tol, 0.0, np.inf, "a finite number >= 0"),
    )
    for name, value, low, high, what in checks:
        ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
            value, bool
        )
        if not ok or not (np.isfinite(value) and low <= value <= high):
            raise ValueError(f"{name} must be {what}, got {value!r}")
    if schedule is not None and not callable(schedule):
        raise ValueError(f"schedule must be callable (an optax schedule), got {schedule!r}")
    dtype = data.y.dtype
    if valid is None:
        vpairs = (
            jnp.zeros(1, jnp.int32),
            jnp.ones(1, jnp.int32),
            jnp.zeros(1, dtype),
            jnp.zeros(1, dtype),
        )
        patience = 2**30
    else:
        vs, vd, vy = _check_valid(valid, N, likelihood)
        vpairs = (
            jnp.asarray(vs, jnp.int32),
            jnp.asarray(vd, jnp.int32),
            jnp.asarray(vy, dtype),
            jnp.ones(vs.shape[0], dtype),
        )
    if (
        isinstance(links_per_node, bool)
        or not isinstance(links_per_node, int)
        or links_per_node < 1
    ):
        raise ValueError(f"links_per_node must be a positive integer, got {links_per_node!r}")
    max_degree = max(1, min(links_per_node, int(np.max(np.diff(np.asarray(data.adj_ptr))))))
    schedule = _Schedule(tau, kappa) if schedule is None else schedule
    static = dict(
        likelihood=likelihood,
        batch=int(batch),
        draws=int(draws),
        max_degree=max_degree,
        schedule=schedule,
        kappa_node=float(kappa_node),
        eval_every=int(eval_every),
        patience=int(patience),
        tol=float(tol),
    )
    return SamplingAlgorithm(
        init=bind(_scvb0_init, data, hyper, vpairs, likelihood=likelihood),
        step=bind(_scvb0_step, data, hyper, vpairs, **static),
        trace=_scvb0_trace,
        spec=ArvizSpec(
            name=f"wmmsb.scvb0.{likelihood}",
            settings={k: v for k, v in static.items() if k != "schedule"},
        ),
    )
