"""The driver's NaN guard and its checks of ``initial_state``, on a toy kernel (compiles in
well under a second)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import SamplingAlgorithm
from bnpjax.infer.base import ArvizSpec, bind
from bnpjax.infer.guard import NonFiniteStateError


class ToyState(NamedTuple):
    x: jax.Array
    count: jax.Array


class OtherState(NamedTuple):
    y: jax.Array


def _init(key):
    return ToyState(jax.random.normal(key), jnp.zeros((), jnp.int32))


def _step(key, state, *, nan_at):
    x = jnp.where(state.count == nan_at, jnp.nan, state.x + jax.random.normal(key))
    return ToyState(x, state.count + 1), {"lp": -0.5 * x**2}


def toy(nan_at=-1, name="toy"):
    return SamplingAlgorithm(init=_init, step=bind(_step, nan_at=nan_at), spec=ArvizSpec(name=name))


def test_a_chain_that_turns_nan_stops_naming_step_variable_and_checkpoint(tmp_path):
    path = tmp_path / "toy.npz"
    with pytest.raises(NonFiniteStateError, match=r"at step 7: x .*toy\.npz.*step 4") as err:
        bnpjax.infer.run(
            toy(nan_at=7), jax.random.key(0), 12, num_chains=2, chunk_size=4,
            progress_bar=False, checkpoint_path=path,
        )  # fmt: skip
    assert err.value.step == 7 and err.value.variables == (".x",) and err.value.chains == (0, 1)
    # the checkpoint holds the last good state (after step 3), and its 4 draws
    ckpt = bnpjax.infer.load_checkpoint(path, toy(nan_at=7))
    assert ckpt.start_step == 4 and ckpt.num_draws == 4
    assert np.all(np.isfinite(np.asarray(ckpt.state.x)))


def test_without_a_checkpoint_the_error_says_how_to_keep_one():
    with pytest.raises(NonFiniteStateError, match="checkpoint_path=") as err:
        bnpjax.infer.run(toy(nan_at=2), jax.random.key(0), 3, num_warmup=2, progress_bar=False)
    assert err.value.step == 2  # found in the sampling phase, after 2 warmup steps


def test_initial_state_with_nan_is_refused():
    result = bnpjax.infer.run(toy(), jax.random.key(0), 2, num_chains=2, progress_bar=False)
    bad = result.final_state._replace(x=result.final_state.x.at[1].set(jnp.nan))
    with pytest.raises(ValueError, match=r"initial_state has NaN .*\.x"):
        bnpjax.infer.run(toy(), jax.random.key(0), 2, num_chains=2, initial_state=bad,
                         progress_bar=False)  # fmt: skip


def test_initial_state_of_another_kernel_is_refused():
    other = {"y": jnp.zeros((2, 3))}
    with pytest.raises(ValueError, match="initial_state is not a state of kernel 'toy'"):
        bnpjax.infer.run(toy(), jax.random.key(0), 2, num_chains=2, initial_state=other,
                         progress_bar=False)  # fmt: skip
    wrong_shape = ToyState(jnp.zeros((2, 5)), jnp.zeros((2,), jnp.int32))
    with pytest.raises(ValueError, match=r"initial_state\.x is float64\[2, 5\]"):
        bnpjax.infer.run(toy(), jax.random.key(0), 2, num_chains=2, initial_state=wrong_shape,
                         progress_bar=False)  # fmt: skip


def test_the_cli_exits_non_zero_when_a_chain_turns_non_finite(monkeypatch, capsys):
    # bnpjax fit wrote all-NaN draws and exited 0: the guard's error now ends the command
    import bnpjax.cli.linreg as linreg_commands
    from bnpjax.cli import main

    def failing_sample(algorithm, args):
        raise NonFiniteStateError("chain 0 turned non-finite at step 3: beta (NaN or inf)")

    monkeypatch.setattr(linreg_commands, "sample", failing_sample)
    assert main(["demo", "linreg", "--no-progress", "--out-dir", "/nonexistent"]) == 1
    assert "turned non-finite at step 3" in capsys.readouterr().err
