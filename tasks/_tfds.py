"""Datasets that come through tensorflow-datasets (IMDB for ``text``, CIFAR-10 for ``image``).

Reading needs no TensorFlow: ``tfds.data_source`` opens the array_record files of a prepared dataset
for random access. Preparing (tfds's download and conversion) does need TensorFlow, so it is an
optional extra: ``pip install 'lra[prepare]'``. Prepare once on a machine with network access; the
prepared folder can then be copied to machines without either.

Where a prepared dataset is looked for, in order (the first that has it wins):

* ``<data_dir>/<task>/``, where ``prepare`` puts it (``<data_dir>/text/imdb_reviews/...``);
* ``<data_dir>/`` itself, so ``--data-dir`` can point at an existing tfds data directory
  (e.g. ``~/tensorflow_datasets``) as long as the dataset there was prepared as array_record.

When the dataset is missing, ``ensure`` checks first what preparing needs (TensorFlow importable, the
download server answering within a few seconds) and fails at once with a message that says how to get
the data, instead of letting tfds retry a download for minutes.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lra.tasks import DataError
from lra.tasks.net import PROBE_TIMEOUT_S, reachable

__all__ = ["PREPARE_EXTRA", "PROBE_TIMEOUT_S", "TfdsDataset", "first", "reachable"]

PREPARE_EXTRA = "prepare"  # the pyproject extra that installs TensorFlow for preparing


def _tensorflow_installed() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


@functools.cache
def _full_name(name: str) -> str:
    import tensorflow_datasets as tfds

    # An explicit (never created) data_dir keeps tfds from looking at ~/tensorflow_datasets.
    return tfds.builder(name, data_dir="/nonexistent/lra-probe").info.full_name


def _file_format(info_file: Path) -> str:
    """The file format a prepared tfds dataset was written in ("tfrecord" when not recorded)."""
    try:
        return json.loads(info_file.read_text()).get("fileFormat", "tfrecord")
    except (OSError, ValueError):
        return "unreadable"


@dataclass(frozen=True)
class TfdsDataset:
    """One tfds dataset as one task uses it.

    name: the tfds name ("imdb_reviews"); task: our task ("text"); url: what tfds downloads (probed
    before downloading); size: the download size, for messages.
    """

    name: str
    task: str
    url: str
    size: str

    def full_name(self) -> str:
        """``name/config/version`` as tfds lays it out under a data directory (this tfds's version
        of the dataset: a copy prepared by another version is not found)."""
        return _full_name(self.name)

    def candidates(self, data_dir: Path) -> list[Path]:
        return [Path(data_dir) / self.task, Path(data_dir)]

    def find(self, data_dir: Path) -> tuple[Path | None, list[str]]:
        """(the first candidate tfds data directory holding the prepared dataset as array_record or
        None, notes on unusable copies found on the way)."""
        full_name = self.full_name()
        notes = []
        for candidate in self.candidates(data_dir):
            info = candidate / full_name / "dataset_info.json"
            if not info.is_file():
                continue
            fmt = _file_format(info)
            if fmt == "array_record":
                return candidate, notes
            notes.append(f"{candidate / full_name} holds it as {fmt}, but reading without "
                         f"TensorFlow needs array_record")
        return None, notes

    def provenance(self, data_dir: Path, splits: list[str], wanted: dict[str, int]):
        """Where a prepared dataset is read from (after ``ensure``). Every split of ours (``splits``)
        reads the dataset's version folder (its array_record shards, ``dataset_info.json``,
        ``features.json``; a split of ours may be a slice of a tfds split), so each names that
        folder and the fingerprint hashes every file in it: a name that is not a path on disk would
        hash nothing, and two different copies would get one fingerprint."""
        from lra.tasks import Provenance, relative

        found = self.find(data_dir)[0] or Path(data_dir) / self.task
        folder = relative(found / self.full_name(), data_dir)
        return Provenance(folder=folder, origin="tensorflow-datasets",
                          files=dict.fromkeys(splits, folder), wanted=dict(wanted))

    def _how_to_get_it(self, data_dir: Path) -> str:
        return (f"To get it, run `python -m lra.data prepare --task {self.task} --data-dir DIR` on a "
                f"machine with network access and TensorFlow (pip install 'lra[{PREPARE_EXTRA}]'; "
                f"about {self.size} to download), then copy DIR/{self.task} to "
                f"{Path(data_dir) / self.task}; or pass --data-dir a tfds data directory that holds "
                f"{self.full_name()} prepared as array_record")

    def _missing(self, data_dir: Path, notes: list[str]) -> str:
        where = " or ".join(str(c / self.full_name()) for c in self.candidates(data_dir))
        found = f" ({'; '.join(notes)})" if notes else ""
        return f"{self.task}: tfds dataset {self.name} is not prepared in {where}{found}"

    def ensure(self, data_dir: Path) -> Path:
        """The tfds data directory holding the dataset; downloads and prepares it into
        ``<data_dir>/<task>`` when it is nowhere, or raises DataError (within seconds) when that
        cannot work here."""
        found, notes = self.find(data_dir)
        if found is not None:
            return found
        problems = []
        if not _tensorflow_installed():
            problems.append(f"preparing it needs TensorFlow, which is not installed (training does "
                            f"not need it): pip install 'lra[{PREPARE_EXTRA}]'")
        if not reachable(self.url):
            host = urllib.parse.urlsplit(self.url).hostname
            problems.append(f"its download server {host} did not answer within "
                            f"{PROBE_TIMEOUT_S:g} s (no network?)")
        if problems:
            raise DataError(f"{self._missing(data_dir, notes)}, and it cannot be prepared here: "
                            f"{'; '.join(problems)}. {self._how_to_get_it(data_dir)}.")
        target = Path(data_dir) / self.task
        print(f"{self._missing(data_dir, notes)}; downloading {self.url} (about {self.size}) and "
              f"preparing it in {target} ...", file=sys.stderr, flush=True)
        import tensorflow_datasets as tfds

        builder = tfds.builder(self.name, data_dir=str(target), file_format="array_record")
        try:
            builder.download_and_prepare()
        except Exception as err:  # download or conversion failed: say what and where
            reason = f"{type(err).__name__}: {str(err).rstrip('.')}"
            raise DataError(f"{self.task}: preparing tfds dataset {self.name} in {target} failed: "
                            f"{reason}. {self._how_to_get_it(data_dir)}.") from err
        return target

    def open(self, data_dir: Path, split: str) -> Sequence[dict[str, Any]]:
        """Random access to one tfds split (a whole split; the tasks slice it themselves)."""
        found, notes = self.find(data_dir)
        if found is None:
            raise DataError(f"{self._missing(data_dir, notes)}; run `python -m lra.data prepare "
                            f"--task {self.task}` (or task.prepare()). "
                            f"{self._how_to_get_it(data_dir)}.")
        import tensorflow_datasets as tfds

        return tfds.data_source(self.name, split=split, data_dir=str(found), download=False)


def first(n: int, total: int) -> int:
    """How many examples a ``*_size`` data option keeps: 0 = all, else the first ``n`` (at most all)."""
    if n < 0:
        raise ValueError(f"a split size must be >= 0 (0 = the whole split), got {n}")
    return total if n == 0 else min(n, total)
