"""bnpjax: exact, compiled samplers for Bayesian nonparametric and latent-factor models on JAX.

``bnpjax.sample(kernel, key, num_samples, ...)`` runs any kernel built by a model factory in
``bnpjax.models`` and returns :class:`arviz.InferenceData`.
"""

from importlib.metadata import PackageNotFoundError, version

from bnpjax.infer import ArvizSpec, SamplingAlgorithm, run, sample

try:
    __version__ = version("bnpjax")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["ArvizSpec", "SamplingAlgorithm", "__version__", "run", "sample"]
