"""bnpjax: exact, compiled samplers for Bayesian nonparametric and latent-factor models on JAX.

``bnpjax.sample(kernel, key, num_samples, ...)`` runs any Markov chain kernel built by a model
factory in ``bnpjax.models``, ``bnpjax.fit(algorithm, key, num_steps, ...)`` any variational
algorithm; both return :class:`arviz.InferenceData`. Compiled programs are kept on disk
between processes (:mod:`bnpjax.compilation_cache`; ``BNPJAX_CACHE_DIR=off`` turns it off).
"""

from importlib.metadata import PackageNotFoundError, version

from bnpjax import compilation_cache

# before anything below compiles a program
compilation_cache._enable_on_import()

from bnpjax.infer import (  # noqa: E402
    ArvizSpec,
    SamplingAlgorithm,
    VariationalAlgorithm,
    fit,
    run,
    sample,
)
from bnpjax.infer.sharding import widen_cpu_thread_pool  # noqa: E402

# a CPU split into devices by XLA_FLAGS gets the threads its LAPACK calls need
widen_cpu_thread_pool()

try:
    __version__ = version("bnpjax")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "ArvizSpec",
    "SamplingAlgorithm",
    "VariationalAlgorithm",
    "__version__",
    "fit",
    "run",
    "sample",
]
