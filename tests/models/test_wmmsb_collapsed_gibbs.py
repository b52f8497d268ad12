"""WMMSB / MMSB collapsed Gibbs: recovery of planted blocks, the InferenceData it writes
(observed pairs only in ``observed_data`` and ``log_likelihood``), predictions from its draws
and its argument checks. Its Geweke test is a row of tests/test_geweke_table.py."""

import jax
import numpy as np
import pytest
from _wmmsb_helpers import auc, held_pairs, planted

import bnpjax
from bnpjax.infer import run
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


@pytest.mark.slow
def test_collapsed_gibbs_recovers_planted_blocks():
    Y, held = planted(3, N=24)
    data = wmmsb.make_data(Y, mask=~held, directed=True)
    hyper = wmmsb.make_hyper(3)
    result = run(
        wmmsb.collapsed_gibbs(data, hyper),
        jax.random.key(0),
        60,
        num_warmup=60,
        progress_bar=False,
    )
    post = result.trace["posterior"]
    scores = [
        auc(Y, held, {k: post[k][0, t] for k in ("n_node", "n_y", "n_phi")}, hyper, "nb")
        for t in (-1, -20)
    ]
    assert min(scores) > 0.85, scores
    # the same from the draws through predict (the mean over the last 20 draws)
    ii, jj = held_pairs(held)
    last = {"posterior": {k: post[k][:, -20:] for k in ("n_node", "n_y", "n_phi")}}
    p_link = wmmsb.predict(last, data, (ii, jj), hyper=hyper).mean((0, 1))
    assert roc_auc(Y[ii, jj] > 0, p_link) > 0.85


def test_inference_data_counts_observed_pairs_only():
    Y, held = planted(5, N=8)
    data = wmmsb.make_data(Y, mask=~held, directed=True)
    hyper = wmmsb.make_hyper(2)
    idata = bnpjax.sample(
        wmmsb.collapsed_gibbs(data, hyper), jax.random.key(0), 3, num_chains=2, progress_bar=False
    )
    observed = int((~held).sum() - 8)  # off-diagonal observed pairs
    assert idata.observed_data["y"].shape == (observed,)
    assert idata.log_likelihood["y"].shape == (2, 3, observed)
    assert np.all(np.isfinite(idata.log_likelihood["y"].values))
    assert idata.posterior["n_node"].dims == ("chain", "draw", "node", "community")
    # the pointwise log-likelihood the trace stores is predict.log_likelihood of the draws
    ll = wmmsb.log_likelihood(idata, data, hyper=hyper)
    np.testing.assert_allclose(ll, idata.log_likelihood["y"].values, rtol=1e-10)
    # held-out pairs: one value per (chain, draw, pair)
    hi, hj = np.nonzero(held)
    test_ll = wmmsb.log_likelihood(idata, data, (hi, hj, Y[hi, hj]), hyper=hyper)
    assert test_ll.shape == (2, 3, hi.shape[0]) and np.all(test_ll < 0)


def test_collapsed_gibbs_checks_its_arguments():
    listed = wmmsb.make_data(np.array([[0, 2, 0], [2, 0, 1], [0, 1, 0]]))
    hyper = wmmsb.make_hyper(2)
    with pytest.raises(ValueError, match="data"):
        wmmsb.collapsed_gibbs(listed._asdict(), hyper)
    with pytest.raises(ValueError, match="hyper"):
        wmmsb.collapsed_gibbs(listed, tuple(hyper))
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.collapsed_gibbs(listed, hyper, likelihood="bg")
    with pytest.raises(ValueError, match="bernoulli"):
        wmmsb.collapsed_gibbs(
            listed, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli"
        )
    with pytest.raises(ValueError, match="rank"):
        wmmsb.collapsed_gibbs(listed)
    with pytest.raises(ValueError, match="rank"):
        wmmsb.collapsed_gibbs(listed, hyper, rank=3)
    with pytest.raises(ValueError, match="listed"):
        wmmsb.collapsed_gibbs(
            wmmsb.make_data(np.ones((3, 3)) - np.eye(3), zeros="dense"),
            wmmsb.make_hyper(2),
        )
    binary = wmmsb.make_data(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]), likelihood="bernoulli")
    wmmsb.collapsed_gibbs(
        binary, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli"
    )
    wmmsb.collapsed_gibbs(binary, rank=2, likelihood="bernoulli")
    with pytest.warns(FutureWarning, match="rank"):
        wmmsb.collapsed_gibbs(listed, K=2)
