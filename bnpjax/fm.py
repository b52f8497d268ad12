"""Bayesian factorization machines with myFM's interface: ``FMRegressor``, ``FMClassifier``,
``FMOrdinal`` (defined in :mod:`bnpjax.models.fm.estimators`, beside their kernel)::

    from bnpjax.fm import FMRegressor
    model = FMRegressor(rank=10, random_state=0).fit(X_train, y_train, n_iter=200,
                                                      n_kept_samples=150)
    y_hat = model.predict(X_test)
"""

from bnpjax.models.fm.estimators import FMClassifier, FMOrdinal, FMRegressor, RelationBlock

__all__ = ["FMClassifier", "FMOrdinal", "FMRegressor", "RelationBlock"]
