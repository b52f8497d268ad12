"""Chains and data laid out over devices with JAX's SPMD engine (``jax.sharding``).

One switch, the ``devices`` argument of :func:`bnpjax.sample` (and :func:`bnpjax.infer.run`):

``None`` (the default)
    every local device of the default backend; the chains are spread over the largest number
    of them that divides ``num_chains`` (one device, and nothing changes, when there is one).
a sequence of devices
    the same, over these devices.
a :class:`jax.sharding.Mesh` with axes named ``"chain"`` and/or ``"data"``
    chains along ``"chain"`` and the data along ``"data"``: every array a model declares
    row-parallel (``sharded_axes`` of its ``Data`` and ``State`` types: pairs of a field name
    and the axis that indexes rows) is
    split along that axis, everything else is replicated. Build one with :func:`make_mesh`.

How it runs. The driver places the kernel's data, the chain keys and the chain states on the
mesh (:func:`place`) and compiles its chunk program with
``jax.jit`` and pinned output shardings, so XLA's SPMD partitioner (GSPMD) splits the vmapped
chains and the row-parallel sums over the devices and every later chunk reuses the program
(the driver's cache keys on the shardings too). Nothing else changes: keys, capacity growth,
thinning, progress, checkpoints and the NaN guard work as on one device.

What can differ from a one-device run, and why:

* chains only: every chain's arithmetic is the same operations on the same values (the
  partitioner only slices the chain axis, and the keys are per chain), but XLA compiles a
  device's slice of the chain batch with its own vectorisation, which may round differently
  in the last bit (measured: at most a few ulp in float32). Discrete draws are therefore
  equal until such a difference flips a near-tie, and continuous draws agree to rounding;
  over short chains the draws are equal (tested). Each device runs its chains as a program
  of its own (:func:`chains_apart`), so a data-dependent loop of the kernel (a rejection
  sampler, a ``while_loop``) runs until that device's chains are done (the start, too:
  :func:`init_apart`); the devices meet once per chunk, for its capacity and finiteness
  flags (a chunk in which a chain ran out of room is rerun whole, so each device stops at
  its own first overflow).
* data sharded: sums over the rows are computed per device and added across devices
  (all-reduce), a different order of the same floating-point additions, with the same
  consequence; global parameters are drawn once from the same key on every device, so every
  device holds the same global state.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bnpjax.compilation_cache import jax_backend_started
from bnpjax.infer.checks import check_integer

__all__ = [
    "CHAIN_AXIS",
    "CPU_DEVICES_VARIABLE",
    "DATA_AXIS",
    "Placement",
    "chains_apart",
    "init_apart",
    "make_mesh",
    "place",
    "resolve_devices",
    "runs_apart",
    "shardings",
    "use_cpu_cores",
    "widen_cpu_thread_pool",
]

#: mesh axis the chains are split along
CHAIN_AXIS = "chain"
#: mesh axis the rows (pairs, ratings) of row-parallel data are split along
DATA_AXIS = "data"


class Placement(NamedTuple):
    """A mesh and where each kind of array of a run lives on it."""

    mesh: Mesh

    @property
    def num_chain_shards(self) -> int:
        return dict(self.mesh.shape).get(CHAIN_AXIS, 1)

    @property
    def num_data_shards(self) -> int:
        return dict(self.mesh.shape).get(DATA_AXIS, 1)

    def sharding(self, *spec) -> NamedSharding:
        names = set(self.mesh.axis_names)
        return NamedSharding(self.mesh, P(*(s if s in names else None for s in spec)))

    @property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, P())

    @property
    def draws(self) -> NamedSharding:
        """Kept draws, ``(draw, chain, ...)``: split by chain, whole over the data axis."""
        return self.sharding(None, CHAIN_AXIS)


#: environment variable read by the ``bnpjax`` command: how many CPU devices to split the
#: processor into (default: one per core this process may use; ``1`` keeps one device)
CPU_DEVICES_VARIABLE = "BNPJAX_CPU_DEVICES"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


#: environment variable read by XLA's CPU client when it starts: the size of the thread pool
#: that the devices' programs and their library calls share (default: the number of cores)
CPU_THREADS_VARIABLE = "NPROC"


def _forced_device_count() -> int | None:
    """The number of CPU devices ``XLA_FLAGS`` forces, if it does."""
    forced = re.search(
        r"xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", "")
    )
    return int(forced.group(1)) if forced else None


def widen_cpu_thread_pool(count: int | None = None) -> None:
    """Give XLA's CPU thread pool ``cores + count`` threads for ``count`` CPU devices (default:
    the number ``XLA_FLAGS`` forces; nothing when it forces none), unless the user chose its
    size (``NPROC``) or JAX's backend has started. ``import bnpjax`` calls it, and
    :func:`use_cpu_cores`.

    Why: jaxlib's batched LAPACK calls (QR, Cholesky: the M3F row draws) run on a thread of
    that pool, hand the batch's pieces to the same pool and wait: with one device per core,
    every thread can be such a waiter and nothing runs the pieces (seen: a Gibbs M3F run over
    two devices of a 2-core CPU stopped at 0 % CPU, both threads in ``ParallelBatchMap``).
    With ``cores + count`` threads a free one always remains, since each program issues one
    factorization at a time (:mod:`bnpjax.models.m3f.linalg`).

    Parameters
    ----------
    count : int, optional
        the number of CPU devices the process will have; default: the number that
        ``XLA_FLAGS`` forces (``xla_force_host_platform_device_count``).
    """
    if jax_backend_started():
        return
    count = _forced_device_count() if count is None else count
    if count is not None and count > 1 and CPU_THREADS_VARIABLE not in os.environ:
        os.environ[CPU_THREADS_VARIABLE] = str(usable_cores() + count)


def use_cpu_cores(count: int | None = None, *, quiet: bool = False) -> int:
    """Split the CPU into ``count`` JAX devices, so that the driver runs chains on several
    cores at once (its default ``devices=None`` spreads the chains over every local device).

    JAX's CPU backend is one device: a run's chains, batched with ``vmap``, then execute on
    one core, since the kernels' operations are too small for XLA's intra-operation threads.
    Split into devices, each core runs its share of the chains; the draws are those of the
    one-device run up to rounding in the last bit (:mod:`bnpjax.infer.sharding`). Measured
    on a 2-core CPU (ILFM demo data, 4 chains with 4 temperatures each, 100 + 200 sweeps):
    33.1 s of sampling on one device, 19.3 s on two. The ``bnpjax`` command calls this at
    start with ``BNPJAX_CPU_DEVICES`` or the number of cores. It must run before JAX starts
    its backend (the first array or ``jax.devices()``); it then changes
    ``jax.devices("cpu")`` for the whole process.

    Parameters
    ----------
    count : int, optional
        the number of CPU devices; default: the cores this process may run on.
    quiet : bool
        say nothing when it is too late (the backend is running) or when ``XLA_FLAGS``
        already sets the number; else a ``RuntimeWarning``.

    Returns
    -------
    int
        the number of CPU devices the process will have (or has, when it was too late).
    """
    count = usable_cores() if count is None else check_integer(count, "count", 1)
    reason = None
    if jax_backend_started():
        reason = "JAX's backend is already running"
    else:
        forced = _forced_device_count()
        if forced is not None:
            reason = "XLA_FLAGS sets xla_force_host_platform_device_count"
        widen_cpu_thread_pool(count if forced is None else forced)
    if reason is None:
        jax.config.update("jax_num_cpu_devices", count)
        return count
    if not quiet:
        warnings.warn(
            f"use_cpu_cores({count}) has no effect: {reason}; call it before any JAX computation",
            RuntimeWarning,
            stacklevel=2,
        )
    return len(jax.devices("cpu"))


def make_mesh(num_chain_shards: int = 1, num_data_shards: int = 1, devices=None) -> Mesh:
    """A ``(chain, data)`` mesh over ``num_chain_shards * num_data_shards`` devices.

    Parameters
    ----------
    num_chain_shards, num_data_shards : int
        how many groups the chains and the data are split into.
    devices : sequence of jax.Device, optional
        default: ``jax.devices()`` (every device of every process of the default backend).

    Returns
    -------
    jax.sharding.Mesh
    """
    num_chain_shards = check_integer(num_chain_shards, "num_chain_shards", 1)
    num_data_shards = check_integer(num_data_shards, "num_data_shards", 1)
    devices = list(jax.devices() if devices is None else devices)
    needed = num_chain_shards * num_data_shards
    if needed > len(devices):
        raise ValueError(
            f"a {num_chain_shards} x {num_data_shards} mesh needs {needed} devices; "
            f"there are {len(devices)} (jax.devices())"
        )
    grid = np.array(devices[:needed], dtype=object).reshape(num_chain_shards, num_data_shards)
    return Mesh(grid, (CHAIN_AXIS, DATA_AXIS))


def resolve_devices(devices, num_chains: int) -> Placement | None:
    """The placement of a run of ``num_chains`` chains, or None to run on one device as is.

    Raises ``ValueError`` (naming ``devices``) for anything but None, a sequence of devices or
    a mesh with axes among ``"chain"``, ``"data"`` whose chain axis divides ``num_chains``.
    """
    if isinstance(devices, Mesh):
        unknown = set(devices.axis_names) - {CHAIN_AXIS, DATA_AXIS}
        if unknown:
            raise ValueError(
                f"devices: a mesh's axes must be named {CHAIN_AXIS!r} and/or {DATA_AXIS!r}, "
                f"got {devices.axis_names}"
            )
        placement = Placement(devices)
        if num_chains % placement.num_chain_shards:
            raise ValueError(
                f"devices: the mesh splits the chains {placement.num_chain_shards} ways, which "
                f"does not divide num_chains={num_chains}"
            )
        return placement if devices.size > 1 else None
    if devices is None:
        devices = jax.local_devices()
    elif isinstance(devices, jax.Device):
        devices = [devices]
    elif isinstance(devices, Sequence) and all(isinstance(d, jax.Device) for d in devices):
        devices = list(devices)
        if not devices:
            raise ValueError("devices must not be empty")
        if len(set(devices)) != len(devices):
            raise ValueError("devices lists a device twice")
    else:
        raise ValueError(
            "devices must be None, a sequence of jax devices or a jax.sharding.Mesh, got "
            f"{type(devices).__name__}"
        )
    # the most devices that split the chains evenly (a chain is never split)
    shards = max(d for d in range(1, len(devices) + 1) if num_chains % d == 0)
    if shards == 1:
        # the plain run is on the default device; any other one is honoured through a mesh
        if devices[0] == jax.devices()[0]:
            return None
        return Placement(Mesh(np.array(devices[:1], dtype=object), (CHAIN_AXIS,)))
    return Placement(Mesh(np.array(devices[:shards], dtype=object), (CHAIN_AXIS,)))


def _sharded_axes(node) -> dict[str, int] | None:
    axes = getattr(type(node), "sharded_axes", None)
    return dict(axes) if axes is not None and hasattr(node, "_fields") else None


def _is_array(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic | jax.ShapeDtypeStruct)


def shardings(tree: Any, placement: Placement, lead: tuple = ()):
    """``tree`` with each array replaced by its sharding on the mesh (other leaves by None):
    fields a model declares row-parallel (``sharded_axes`` of its NamedTuple type) split along
    ``"data"`` after the ``lead`` axes, every other array split along ``lead`` only."""

    def array_sharding(x, axis=None, name=None):
        shape = tuple(x.shape) if isinstance(x, jax.ShapeDtypeStruct) else np.shape(x)
        spec = list(lead[: len(shape)])
        where = len(lead) + (axis or 0)
        if axis is not None and where < len(shape) and placement.num_data_shards > 1:
            if shape[where] % placement.num_data_shards == 0:
                spec += [None] * (where - len(spec)) + [DATA_AXIS]
            else:
                # XLA lays arrays out in equal pieces only: this one stays whole
                warnings.warn(
                    f"{name}: its {shape[where]} rows do not split into "
                    f"{placement.num_data_shards} equal parts, so it stays whole on every "
                    "device (choose a data axis that divides them)",
                    UserWarning,
                    stacklevel=2,
                )
        return placement.sharding(*spec)

    def visit(node):
        axes = _sharded_axes(node)
        if axes is None:
            return array_sharding(node) if _is_array(node) else None
        return type(node)(
            **{
                name: array_sharding(value, axes[name], name)
                if name in axes and _is_array(value)
                else jax.tree_util.tree_map(visit, value, is_leaf=_is_declared)
                for name, value in node._asdict().items()
            }
        )

    return jax.tree_util.tree_map(visit, tree, is_leaf=_is_declared)


def _is_declared(node) -> bool:
    return _sharded_axes(node) is not None


def place(tree: Any, placement: Placement, lead: tuple = ()):
    """``tree``'s arrays moved to their :func:`shardings` (non-array leaves unchanged)."""
    return jax.tree_util.tree_map(
        lambda x, s: x if s is None else _put(x, s),
        tree,
        shardings(tree, placement, lead),
        is_leaf=lambda x: x is None,
    )


def _put(x, sharding: NamedSharding):
    """``x`` laid out as ``sharding``. A mesh over several processes (``jax.distributed``)
    holds devices this process cannot address: every process then holds the same host value
    (same key, same data) and contributes the pieces of its own devices."""
    if sharding.is_fully_addressable or (isinstance(x, jax.Array) and not x.is_fully_addressable):
        return jax.device_put(x, sharding)
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        raw = _put(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(raw, impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def lay_out_chunk(fns: Any, states: Any, placement: Placement | None, warmup: bool):
    """A chunk program's kernel functions ``fns`` and chain ``states`` placed on the mesh,
    and the program's output shardings (None without ``placement``). The driver lays a phase
    out once, and again after growth: a chunk's states come out placed, and placing a
    kernel's hundreds of leaves before every chunk kept the devices waiting."""
    if placement is None:
        return fns, states, None
    fns, states = place(fns, placement), place_chains(states, placement)
    rep, kept = placement.replicated, None if warmup else placement.draws
    return fns, states, (chain_shardings(states, placement), kept, rep, rep, rep)


def place_chains(states: Any, placement: Placement):
    """Chain states (leading chain axis) on the mesh."""
    return place(states, placement, (CHAIN_AXIS,))


def chain_shardings(states: Any, placement: Placement):
    """The shardings :func:`place_chains` gives ``states`` (the pinned output shardings)."""
    return shardings(states, placement, (CHAIN_AXIS,))


def runs_apart(placement: Placement | None) -> bool:
    """Whether the chunk runs as one program per device (:func:`chains_apart`): the mesh
    splits chains only."""
    return placement is not None and placement.num_data_shards == 1


def chains_apart(chunk, placement: Placement | None, record: bool):
    """The driver's chunk program ``chunk(dynamic, states, keys, first_step, num_valid)`` as
    one program per device over its own chains (``jax.shard_map``) when the mesh splits
    chains only; else ``chunk`` (one SPMD program, GSPMD).

    Chains are independent, but in one SPMD program over the devices a data-dependent loop of
    the kernel (a ``while_loop``, a ``fori_loop`` with a traced count) runs until every
    device's chains are done, and the devices agree on that at each iteration: for sweeps of
    many small loops (the collapsed IBP sampler's rows and features) that cost more than the
    second core gained. Apart, each device loops on its own chains, and the devices meet once
    per chunk (its capacity and finiteness flags)."""
    if not runs_apart(placement):
        return chunk
    states, kept = P(CHAIN_AXIS), P(None, CHAIN_AXIS) if record else P()
    return jax.shard_map(
        chunk,
        mesh=placement.mesh,
        in_specs=(P(), states, P(CHAIN_AXIS), P(), P()),
        out_specs=(states, kept, P(), P(), P()),
        check_vma=False,
    )


def init_apart(init, placement: Placement | None):
    """The driver's init program ``init(dynamic, keys) -> states`` as one program per device
    over its own chains when the mesh splits chains only (else ``init``), for the reason of
    :func:`chains_apart`: a kernel's start can run a sampler of its own (the row-parallel IBP
    sampler's warm start, 200 collapsed sweeps: 5.4 s as one SPMD program over two CPU
    devices, 0.3 s apart)."""
    if not runs_apart(placement):
        return init
    return jax.shard_map(
        init,
        mesh=placement.mesh,
        in_specs=(P(), P(CHAIN_AXIS)),
        out_specs=P(CHAIN_AXIS),
        check_vma=False,
    )


def to_host(tree):
    """``tree``'s arrays as NumPy arrays on this host, gathered from every process where a
    mesh spans several (each process gets the whole)."""

    def get(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return jax.device_get(x)

    return jax.tree_util.tree_map(get, tree)
