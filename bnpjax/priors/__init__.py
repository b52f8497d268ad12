"""Priors shared by the models: the Indian buffet process."""

from bnpjax.priors import ibp

__all__ = ["ibp"]
