"""The NumPy R-hat and ESS agree with ArviZ's estimators, and behave as estimates should."""

import numpy as np
import pytest

from bnpjax.infer.rhat_ess import ess_bulk, ess_tail, split_rhat


def _ar1(chains, draws, columns, phi, rng):
    x = np.zeros((chains, draws, columns))
    noise = rng.normal(size=x.shape)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def _cases():
    rng = np.random.default_rng(0)
    for chains, draws in [(1, 7), (2, 9), (4, 100), (3, 401)]:
        for phi in (0.0, 0.6, 0.99):
            yield _ar1(chains, draws, 2, phi, rng)
        yield rng.poisson(2.0, size=(chains, draws, 2)).astype(float)  # ties, like K+
        stuck = rng.normal(size=(chains, draws, 2))
        stuck[0] += 5.0  # one chain elsewhere
        yield stuck


def _arviz_estimates(column):
    """ArviZ's (0.x: ``arviz``; 1.x: ``arviz_stats``) rank R-hat, bulk and tail ESS."""
    az = pytest.importorskip("arviz")
    if int(az.__version__.split(".")[0]) >= 1:  # pragma: no cover - the 1.x line
        az = pytest.importorskip("arviz_stats")
    ess_b = float(az.ess(column, method="bulk"))
    ess_t = float(az.ess(column, method="tail"))
    rhat = float(az.rhat(column, method="rank")) if column.shape[0] > 1 else np.nan
    return ess_b, ess_t, rhat


def test_the_estimates_are_arviz_s():
    for values in _cases():
        mine = np.stack(
            [
                ess_bulk(values),
                ess_tail(values),
                split_rhat(values) if values.shape[0] > 1 else np.full(values.shape[2], np.nan),
            ],
            axis=1,
        )
        for column in range(values.shape[2]):
            reference = np.array(_arviz_estimates(values[:, :, column]))
            np.testing.assert_allclose(mine[column], reference, rtol=1e-9, equal_nan=True)


def test_many_columns_in_one_call_are_each_arviz_s():
    # the estimators run over every column at once: columns whose autocorrelation sequences
    # stop at different lags (iid, AR(1) up to 0.995, which reaches the lag limit of short
    # chains), ties, a stuck chain, a constant column and a NaN one, side by side
    rng = np.random.default_rng(3)
    for chains, draws in [(2, 12), (4, 60), (4, 500)]:
        columns = [_ar1(chains, draws, 1, phi, rng) for phi in (0.0, -0.5, 0.3, 0.9, 0.995)]
        columns.append(rng.poisson(1.0, size=(chains, draws, 1)).astype(float))
        stuck = rng.normal(size=(chains, draws, 1))
        stuck[0] += 4.0
        columns += [stuck, np.full((chains, draws, 1), 2.5)]
        values = np.concatenate(columns, axis=2)
        mine = np.stack([ess_bulk(values), ess_tail(values), split_rhat(values)], axis=1)
        for column in range(values.shape[2] - 1):  # ArviZ's constant column: checked below
            reference = np.array(_arviz_estimates(values[:, :, column]))
            np.testing.assert_allclose(mine[column], reference, rtol=1e-9, equal_nan=True)
        assert mine[-1, 0] == mine[-1, 1] == chains * draws
        with_nan = values.copy()
        with_nan[1, 3, 2] = np.nan
        assert np.isnan(ess_bulk(with_nan)[2]) and np.isfinite(ess_bulk(with_nan)[3])


def test_independent_draws_give_an_ess_near_their_number_and_rhat_near_one():
    # 4 x 1000 iid normal draws: the ESS estimate's sd is a few per cent of 4000 and R-hat's
    # deviation from 1 is of order 1 / sqrt(4000); the bounds are several times that
    values = np.random.default_rng(1).normal(size=(4, 1000, 3))
    assert np.all(np.abs(ess_bulk(values) / 4000 - 1) < 0.15)
    assert np.all(np.abs(split_rhat(values) - 1) < 0.01)


def test_a_stuck_chain_is_flagged_and_nan_propagates():
    values = np.random.default_rng(2).normal(size=(4, 200, 2))
    values[1, :, 0] += 3.0
    values[2, 5, 1] = np.nan
    rhat = split_rhat(values)
    assert rhat[0] > 1.2  # one chain 3 sd away: 1.47 here
    assert np.isnan(rhat[1]) and np.isnan(ess_bulk(values)[1]) and np.isnan(ess_tail(values)[1])


def test_values_of_another_shape_are_refused():
    with pytest.raises(ValueError, match="values must have shape"):
        split_rhat(np.zeros((4, 10)))


@pytest.mark.parametrize("columns_per_block", [None, 2])
def test_summary_estimates_are_the_three_estimators(columns_per_block, monkeypatch):
    from bnpjax.infer import rhat_ess
    from bnpjax.infer.rhat_ess import summary_estimates

    def blocked(estimator, values):  # many columns: a block of them at a time
        with monkeypatch.context() as patch:
            if columns_per_block:
                patch.setattr(rhat_ess, "_BLOCK_VALUES", 4 * 3 * 61 * columns_per_block)
            return estimator(values)

    rng = np.random.default_rng(5)
    # an even number of draws: the quantiles and the median come from the split chains' sort;
    # an odd one: the split drops the middle draw, and they are computed apart
    for draws in (60, 61):
        values = rng.normal(size=(3, draws, 6)).cumsum(axis=1) * 0.1
        values += rng.normal(size=(3, draws, 6))
        values[:, :, 1] = 2.0  # constant
        values[:, :, 2] = rng.integers(0, 3, size=(3, draws))  # ties
        values[1, 7, 3] = np.nan
        expected = (ess_bulk(values), ess_tail(values), split_rhat(values))  # whole
        for estimator, want in zip((ess_bulk, ess_tail, split_rhat), expected, strict=True):
            np.testing.assert_array_equal(blocked(estimator, values), want)
        for got, want in zip(blocked(summary_estimates, values), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    bulk, _, rhat = summary_estimates(values[:1])
    np.testing.assert_array_equal(bulk, ess_bulk(values[:1]))
    assert np.isnan(rhat).all()


def test_quantiles_and_medians_of_sorted_rows_are_numpy_s():
    from bnpjax.infer.rhat_ess import _sorted_median, _sorted_quantile

    rng = np.random.default_rng(6)
    for size in (1, 2, 7, 400, 4001):
        rows = np.concatenate([rng.normal(size=(3, size)), rng.integers(0, 4, (2, size))])
        ordered = np.sort(rows, axis=1)
        for probability in (0.0, 0.05, 0.37, 0.5, 0.95, 1.0):
            np.testing.assert_array_equal(
                _sorted_quantile(ordered, probability), np.quantile(rows, probability, axis=1)
            )
        np.testing.assert_array_equal(_sorted_median(ordered), np.median(rows, axis=1))
