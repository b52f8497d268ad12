import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit

from bnpjax.ops import softplus


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_softplus_matches_log1p_exp_and_its_derivative_is_the_sigmoid(dtype):
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs jax_enable_x64")
    x = jnp.concatenate(
        [jnp.linspace(-30, 30, 601), jnp.array([-1e30, -88.0, 0.0, 88.0, 1e30])]
    ).astype(dtype)
    got = np.asarray(softplus(x), np.float64)
    exact = np.logaddexp(0.0, np.asarray(x, np.float64))
    eps = np.finfo(np.dtype(dtype)).eps
    np.testing.assert_allclose(got, exact, rtol=4 * eps, atol=4 * eps * np.log(2))
    assert softplus(x).dtype == dtype
    grad = jax.vmap(jax.grad(softplus))(x)
    np.testing.assert_allclose(
        np.asarray(grad, np.float64), expit(np.asarray(x, np.float64)),
        rtol=4 * eps, atol=4 * eps,
    )  # fmt: skip
