"""Weights & Biases, optional: ``lra.run --wandb PROJECT`` (and ``lra.sweep --wandb PROJECT``), with
``--wandb-entity`` (the team or user that owns the project), ``--wandb-group`` (e.g. one per sweep)
and ``--wandb-tags a,b`` for a lab's shared workspace.

Off by default and imported only when asked for. The run logs the scalars its TensorBoard files get
(``metrics_log.TENSORBOARD_TAGS``: train loss, accuracy, learning rate, gradient norm, steps/s; val
loss and accuracy) at the same steps, the test accuracies as summary values, and the resolved
config. The wandb run id is kept in the work directory (``wandb_id``), so a resumed run continues
the same wandb run; wandb ignores the steps a resumed run logs again up to its last logged step.
``--force`` moves ``wandb_id`` and ``wandb/`` aside with the run's other files
(``lra.workdir.RUN_FILES``), so a forced re-run is a new wandb run.
``WANDB_MODE=offline`` (wandb's own variable) writes under ``<workdir>/wandb/`` without a network;
``wandb sync`` uploads it later. The result file records the run's ``tracker`` (``record``): the
id, project, entity, group and tags, so a row of the leaderboard leads back to its wandb run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ID_FILE = "wandb_id"
FILES_DIR = "wandb"  # what wandb.init(dir=workdir) writes under the work directory


class TrackerError(RuntimeError):
    """wandb was asked for and cannot be used (not installed, or it refused to start)."""


@dataclass(frozen=True)
class WandbOptions:
    """Where a run logs: ``project`` (required), ``entity`` (None: wandb's default for the logged-in
    user), ``group`` and ``tags`` (none by default)."""

    project: str
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


def parse_tags(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``; wandb refuses tags longer than 64 characters."""
    tags = tuple(t.strip() for t in (text or "").split(",") if t.strip())
    for tag in tags:
        if len(tag) > 64:
            raise ValueError(f"--wandb-tags: {tag!r} is longer than 64 characters (wandb's limit)")
    return tags


class Wandb:
    def __init__(self, project: str | WandbOptions, workdir: Path, *, name: str,
                 config: dict[str, Any]):
        self.options = project if isinstance(project, WandbOptions) else WandbOptions(project)
        project = self.options.project
        try:
            import wandb
        except ImportError:
            raise TrackerError("--wandb needs the wandb package, which is not installed: "
                               "pip install wandb") from None
        id_file = Path(workdir) / ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:16]
        id_file.write_text(run_id + "\n")
        self.run_id = run_id
        o = self.options
        try:
            self.run = wandb.init(project=project, entity=o.entity, group=o.group,
                                  tags=list(o.tags) or None, dir=str(workdir), name=name, id=run_id,
                                  resume="allow", config=config, reinit=True)
        except Exception as err:  # wandb raises its own types (network, login, bad project name)
            raise TrackerError(f"wandb did not start for project {project!r}: "
                               f"{type(err).__name__}: {err}") from None

    def record(self) -> dict[str, Any]:
        """What the result file keeps of this run (its ``tracker`` field)."""
        o = self.options
        return {"name": "wandb", "run_id": self.run_id, "project": o.project, "entity": o.entity,
                "group": o.group, "tags": list(o.tags)}

    def log(self, step: int, split: str, values: dict[str, float]) -> None:
        self.run.log({f"{split}/{k}": v for k, v in values.items()}, step=step)

    def summary(self, split: str, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.run.summary[f"{split}/{k}"] = v

    def close(self) -> None:
        self.run.finish()
