"""Priors shared by the models: the Indian buffet process, and (importing NumPyro, so only
when asked for) its NumPyro distribution ``IndianBuffetProcess``."""

from bnpjax.priors import ibp

__all__ = ["IndianBuffetProcess", "capacity_for", "ibp"]


def __getattr__(name):
    if name in ("IndianBuffetProcess", "capacity_for"):
        from bnpjax.priors import ibp_distribution

        return getattr(ibp_distribution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
