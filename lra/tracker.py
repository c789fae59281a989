"""Weights & Biases, optional: ``lra.run --wandb PROJECT`` (and ``lra.sweep --wandb PROJECT``).

Off by default and imported only when asked for. The run logs the scalars its TensorBoard files get
(``metrics_log.TENSORBOARD_TAGS``: train loss, accuracy, learning rate, gradient norm, steps/s; val
loss and accuracy) at the same steps, the test accuracies as summary values, and the resolved
config. The wandb run id is kept in the work directory (``wandb_id``), so a resumed run continues
the same wandb run; wandb ignores the steps a resumed run logs again up to its last logged step.
``--force`` moves ``wandb_id`` and ``wandb/`` aside with the run's other files
(``lra.workdir.RUN_FILES``), so a forced re-run is a new wandb run.
``WANDB_MODE=offline`` (wandb's own variable) writes under ``<workdir>/wandb/`` without a network;
``wandb sync`` uploads it later.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

ID_FILE = "wandb_id"
FILES_DIR = "wandb"  # what wandb.init(dir=workdir) writes under the work directory


class TrackerError(RuntimeError):
    """wandb was asked for and cannot be used (not installed, or it refused to start)."""


class Wandb:
    def __init__(self, project: str, workdir: Path, *, name: str, config: dict[str, Any]):
        try:
            import wandb
        except ImportError:
            raise TrackerError("--wandb needs the wandb package, which is not installed: "
                               "pip install wandb") from None
        id_file = Path(workdir) / ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:16]
        id_file.write_text(run_id + "\n")
        try:
            self.run = wandb.init(project=project, dir=str(workdir), name=name, id=run_id,
                                  resume="allow", config=config, reinit=True)
        except Exception as err:  # wandb raises its own types (network, login, bad project name)
            raise TrackerError(f"wandb did not start for project {project!r}: "
                               f"{type(err).__name__}: {err}") from None

    def log(self, step: int, split: str, values: dict[str, float]) -> None:
        self.run.log({f"{split}/{k}": v for k, v in values.items()}, step=step)

    def summary(self, split: str, values: dict[str, float]) -> None:
        for k, v in values.items():
            self.run.summary[f"{split}/{k}"] = v

    def close(self) -> None:
        self.run.finish()
