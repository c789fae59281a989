"""Orbax checkpoints of a run: the last state (for resuming) and the best-validation state.

Layout: ``<workdir>/checkpoints/last/<step>/`` and ``<workdir>/checkpoints/best/<step>/``, one of each
kept. Each holds ``state`` (step, parameters, optimizer state) and ``meta`` (JSON: the resolved config,
the metric history needed to finish the run, the data position = the step). Saves are asynchronous;
the RNG needs no saving because every step's randomness is derived from (seed, step).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from lra.config import flatten


class ConfigMismatchError(RuntimeError):
    """The work directory holds a checkpoint of a different configuration."""


def _manager(path: Path) -> ocp.CheckpointManager:
    # Several processes save synchronously: with async saves orbax (0.12) sometimes finalised on
    # process 0 before process 1's array metadata existed and failed the save.
    options = ocp.CheckpointManagerOptions(max_to_keep=1, create=True,
                                           enable_async_checkpointing=jax.process_count() == 1)
    return ocp.CheckpointManager(path.absolute(), options=options)


class Checkpoints:
    def __init__(self, workdir: Path):
        self.root = Path(workdir) / "checkpoints"
        self.last = _manager(self.root / "last")
        self.best = _manager(self.root / "best")

    def latest_step(self) -> int | None:
        return self.last.latest_step()

    def save(self, which: str, step: int, state: Any, meta: dict[str, Any]) -> None:
        manager = self.last if which == "last" else self.best
        manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                   meta=ocp.args.JsonSave(meta)), force=True)

    def restore_meta(self, which: str = "last") -> dict[str, Any]:
        manager = self.last if which == "last" else self.best
        step = manager.latest_step()
        return manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta

    def restore(self, which: str, like: Any) -> tuple[Any, dict[str, Any]]:
        """Restore into the structure, shapes and shardings of ``like`` (a state pytree)."""
        manager = self.last if which == "last" else self.best
        step = manager.latest_step()
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        out = manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
        return out.state, out.meta

    def wait(self) -> None:
        self.last.wait_until_finished()
        self.best.wait_until_finished()

    def close(self) -> None:
        self.last.close()
        self.best.close()


def check_same_config(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume a checkpoint written under another configuration, naming the keys."""
    a, b = flatten(saved), flatten(current)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
    if differ:
        lines = [f"  {k}: checkpoint {a.get(k, '<absent>')!r}, now {b.get(k, '<absent>')!r}"
                 for k in differ]
        raise ConfigMismatchError(
            "the work directory holds a checkpoint of a different configuration:\n"
            + "\n".join(lines) + "\nuse another --workdir, or delete its checkpoints/ to start over")


def peek_last(workdir: Path) -> tuple[int, dict[str, Any] | None] | None:
    """(step, config) of the last checkpoint in ``workdir``, or None when it holds none.

    Read from the files, without a CheckpointManager (which would create directories): ``lra.sweep``
    looks into many work directories before it starts anything. Only finalised steps count (orbax
    writes a step under a temporary name and renames it to the step number when complete). The
    config is None where the meta file cannot be read.
    """
    last = Path(workdir) / "checkpoints" / "last"
    steps = sorted(int(p.name) for p in last.iterdir() if p.name.isdigit()) if last.is_dir() else []
    if not steps:
        return None
    try:  # orbax's JsonSave of the "meta" item, written by Checkpoints.save
        meta = json.loads((last / str(steps[-1]) / "meta" / "metadata").read_text())
        return steps[-1], meta["config"]
    except (OSError, ValueError, KeyError, TypeError):
        return steps[-1], None
