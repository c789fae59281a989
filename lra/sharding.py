"""Devices, the mesh and how arrays are laid out on it (jax.jit + NamedSharding; no pmap).

One 1-D mesh over every device of every process, axis ``data``. Batches are split along it;
parameters and optimizer state are replicated. Multi-host runs start with ``jax.distributed``.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None) -> bool:
    """Start ``jax.distributed`` when the flags or the environment ask for several processes.

    Flags win; otherwise JAX's own environment detection (``JAX_COORDINATOR_ADDRESS``, SLURM, TPU
    metadata, ...) is used when ``JAX_COORDINATOR_ADDRESS`` or ``LRA_DISTRIBUTED=1`` is set.
    Returns True if a distributed runtime was initialised.
    """
    if coordinator or num_processes or process_id is not None:
        if not (coordinator and num_processes and process_id is not None):
            raise ValueError("--coordinator, --num-processes and --process-id go together")
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id)
        return True
    if os.environ.get("JAX_COORDINATOR_ADDRESS") or os.environ.get("LRA_DISTRIBUTED") == "1":
        jax.distributed.initialize()
        return True
    return False


def make_mesh() -> Mesh:
    return jax.make_mesh((jax.device_count(),), (DATA_AXIS,),
                         axis_types=(jax.sharding.AxisType.Auto,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def check_batch_size(global_batch: int, mesh: Mesh, what: str = "train.batch_size") -> None:
    n = mesh.devices.size
    if global_batch % n:
        raise ValueError(f"{what}={global_batch} does not divide over {n} devices; use a multiple "
                         f"of {n}")


def to_global(local_batch: dict[str, np.ndarray], sharding: NamedSharding) -> dict[str, jax.Array]:
    """This process's rows of a batch -> global arrays sharded along ``data``."""
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local_batch.items()}
