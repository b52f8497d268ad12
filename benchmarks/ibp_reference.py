"""A NumPy reference of the collapsed Gibbs sampler of the linear-Gaussian IBP model, in the
style of PyIBP (the accelerated-sampling code distributed with Doshi-Velez & Ghahramani 2009),
for the ESS-per-second comparison of ``benchmarks/convergence.py --reference``.

PyIBP is not on the package index (and is Python 2); this module is a port of its sweep, not
of its code:

* rows in a uniformly random order; the posterior of ``A`` given the other rows kept in
  information form (``P = Z'Z / sigma_x^2 + I / sigma_a^2``, ``h = Z'X / sigma_x^2``),
  row ``i`` removed and added back by rank-one updates, ``P`` inverted per row and recomputed
  from scratch every 5 rows (PyIBP's ``sampleZ``);
* each feature held by another row flipped from its collapsed conditional
  ``p(z_ik | Z_-ik) ∝ (m_-ik / N)^z (1 - m_-ik / N)^(1 - z) N(x_i; z_i mu, v_i I)``;
* the row's singletons replaced by a Metropolis-Hastings move with a Poisson(alpha / N)
  proposal for their number (Meeds et al. 2007, as in PyIBP);
* after the sweep, ``alpha | Z ~ Gamma(a + K+, rate b + H_N)``, then ``A | Z, X`` and the
  conjugate inverse-Gamma updates of ``sigma_x^2`` and ``sigma_a^2`` (exact conditionals;
  PyIBP's own hyperparameter updates are not: it uses ``N`` for ``H_N`` and
  ``sum_k m_k`` for ``K+`` in alpha's, and the posterior mean of ``A`` in the variances').

The model is the one ``bnpjax.models.ibp_lg`` fits with ``sample_offset=False`` on the data
centred on their column means (``make_data``'s standardised units), with the same
hyperpriors (``make_hyper()``'s defaults). The start is PyIBP's: ``Z`` drawn from the IBP
prior with ``alpha = 1`` (or ``start="random10"``: bnpjax's default start, 10 columns with
entries on with probability 1/2), ``sigma_x = sigma_a = 1``.

References
----------
Doshi-Velez, F. & Ghahramani, Z. (2009). Accelerated sampling for the Indian buffet process.
*ICML*.
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224.
Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. *NIPS* 19.
"""

from __future__ import annotations

import time

import numpy as np

REFRESH = 5  # PyIBP recomputes the information form from scratch every 5 rows


class CollapsedIBP:
    """One chain of the reference sampler on ``X`` (N x D, centred)."""

    def __init__(self, X, rng, *, hyper=(1.0, 1.0, 1.0, 1.0, 1.0, 1.0), start="prior"):
        self.X = np.asarray(X, float)
        self.N, self.D = self.X.shape
        self.rng = rng
        self.a_alpha, self.b_alpha, self.a_x, self.b_x, self.a_a, self.b_a = hyper
        self.alpha, self.sigma_x, self.sigma_a = 1.0, 1.0, 1.0
        self.harmonic = np.sum(1.0 / np.arange(1, self.N + 1))
        if start == "prior":
            self.Z = self._prior_draw()
        else:
            self.Z = (rng.random((self.N, 10)) < 0.5).astype(float)
        self.Z = self.Z[:, self.Z.sum(0) > 0]

    def _prior_draw(self):
        rows, K = [], 0
        for i in range(1, self.N + 1):
            m = np.sum(rows, axis=0) if rows else np.zeros(0)
            z = (self.rng.random(K) < m / i).astype(float)
            new = self.rng.poisson(self.alpha / i)
            rows = [np.concatenate([r, np.zeros(new)]) for r in rows]
            rows.append(np.concatenate([z, np.ones(new)]))
            K += new
        return np.array(rows).reshape(self.N, K)

    # the posterior of A given rows, in information form
    def _information(self):
        sx2, sa2 = self.sigma_x**2, self.sigma_a**2
        P = self.Z.T @ self.Z / sx2 + np.eye(self.Z.shape[1]) / sa2
        h = self.Z.T @ self.X / sx2
        return P, h

    def _log_pred(self, z, x, mean_A, cov_A):
        """log N(x; z mean_A, (sigma_x^2 + z cov_A z') I) up to a constant."""
        var = self.sigma_x**2 + z @ cov_A @ z
        r = x - z @ mean_A
        return -0.5 * self.D * np.log(var) - 0.5 * (r @ r) / var

    def sweep_Z(self):
        sx2, sa2 = self.sigma_x**2, self.sigma_a**2
        rng = self.rng
        for count, i in enumerate(rng.permutation(self.N)):
            if count % REFRESH == 0:
                P, h = self._information()
            z, x = self.Z[i].copy(), self.X[i]
            P = P - np.outer(z, z) / sx2
            h = h - np.outer(z, x) / sx2
            cov_A = np.linalg.inv(P)
            mean_A = cov_A @ h
            m = self.Z.sum(0) - z
            singles = (z > 0) & (m == 0)
            for k in np.flatnonzero(~singles):
                z[k] = 0.0
                lp0 = np.log(self.N - m[k]) + self._log_pred(z, x, mean_A, cov_A)
                z[k] = 1.0
                lp1 = np.log(m[k]) + self._log_pred(z, x, mean_A, cov_A)
                z[k] = float(rng.random() < 1.0 / (1.0 + np.exp(lp0 - lp1)))
            # singletons: MH with a Poisson(alpha / N) proposal of their number
            k_old = int(singles.sum())
            k_new = rng.poisson(self.alpha / self.N)
            base = z * ~singles
            var = sx2 + base @ cov_A @ base
            r = x - base @ mean_A
            lp_old = -0.5 * self.D * np.log(var + k_old * sa2) - 0.5 * (r @ r) / (var + k_old * sa2)
            lp_new = -0.5 * self.D * np.log(var + k_new * sa2) - 0.5 * (r @ r) / (var + k_new * sa2)
            if np.log(rng.random()) < lp_new - lp_old:
                keep = ~singles | (z == 0) | (m > 0)
                self.Z[i] = z
                self.Z = self.Z[:, keep]
                z = z[keep]
                P, h = P[np.ix_(keep, keep)], h[keep]
                if k_new:
                    self.Z = np.hstack([self.Z, np.zeros((self.N, k_new))])
                    self.Z[i, -k_new:] = 1.0
                    z = self.Z[i]
                    K = P.shape[0]
                    P = np.pad(P, ((0, k_new), (0, k_new)))
                    P[K:, K:] = np.eye(k_new) / sa2
                    h = np.vstack([h, np.zeros((k_new, self.D))])
            self.Z[i] = z
            P = P + np.outer(z, z) / sx2
            h = h + np.outer(z, x) / sx2
        self.Z = self.Z[:, self.Z.sum(0) > 0]

    def sweep_hyper(self):
        rng = self.rng
        K = self.Z.shape[1]
        self.alpha = rng.gamma(self.a_alpha + K) / (self.b_alpha + self.harmonic)
        P, h = self._information()
        chol = np.linalg.cholesky(P)
        mean = np.linalg.solve(P, h)
        A = mean + np.linalg.solve(chol.T, rng.standard_normal((K, self.D)))
        r = self.X - self.Z @ A
        shape_x = self.a_x + 0.5 * self.N * self.D
        self.sigma_x = np.sqrt((self.b_x + 0.5 * np.sum(r**2)) / rng.gamma(shape_x))
        shape_a = self.a_a + 0.5 * K * self.D
        self.sigma_a = np.sqrt((self.b_a + 0.5 * np.sum(A**2)) / rng.gamma(shape_a))

    def step(self):
        self.sweep_Z()
        self.sweep_hyper()
        return self.Z.shape[1]


def run_chains(X, num_chains, num_warmup, num_samples, *, seed=0, start="prior"):
    """``num_chains`` chains one after another: the K+ trace (chains x draws) and the seconds
    spent on the kept sweeps (warmup excluded) and in all."""
    traces, sampling, total = [], 0.0, 0.0
    for c in range(num_chains):
        chain = CollapsedIBP(X, np.random.default_rng([seed, c]), start=start)
        t0 = time.perf_counter()
        for _ in range(num_warmup):
            chain.step()
        t1 = time.perf_counter()
        traces.append([chain.step() for _ in range(num_samples)])
        t2 = time.perf_counter()
        sampling += t2 - t1
        total += t2 - t0
    return np.asarray(traces, float), sampling, total
