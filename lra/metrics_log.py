"""What a run reports while it trains: ``metrics.jsonl``, TensorBoard events, the at-chance notice.

``MetricsLog`` is the one writer of a work directory's metrics. Every record goes to
``<workdir>/metrics.jsonl`` (one JSON object per line: ``step``, ``split`` and the values) and, for
the splits TensorBoard shows, to event files under ``<workdir>/tensorboard/`` as scalars tagged
``<split>/<name>`` (``train/loss``, ``train/accuracy``, ``train/lr``, ``train/grad_norm``,
``train/steps_per_s``, ``val/loss``, ``val/accuracy``). The first record, ``split = "run"`` at step
0, names the run (task, attention, preset, seed), so ``python -m lra.curves`` needs nothing else.
Only process 0 writes; the others hold a disabled log.

The logs mirror the checkpoint. A run resumed from step S first cuts both logs back to what was
written up to step S (records at S come before the checkpoint at S; ``test_at_last`` comes after the
last checkpoint and is written again when the run finishes), so the resumed run continues the same
curves and no (split, step) is ever written twice. A run that starts from step 0 starts new logs.
Event files are rewritten record by record (TFRecord framing: little-endian u64 length, masked
CRC-32C of the length, payload, masked CRC-32C of the payload); a record cut short by a kill at the
end of a file is dropped. Writes are flushed at each record, so a kill loses nothing a checkpoint
already covers.

The writer is tensorboardX: maintained, on PyPI, and it needs neither TensorFlow nor PyTorch
(only protobuf, which the stack already has). Viewing needs ``pip install tensorboard``.

``AtChance`` watches validation: once accuracy has stayed within one standard error of chance for
``patience`` evaluations in a row, it returns a one-line notice. Chance is the task's own
(``Task.chance``: 1 / its number of classes, per example; MQAR's 2 / V, per query position) and the
standard error that of an accuracy measured on n predictions at chance, sqrt(p (1 - p) / n): a
stuck model that predicts one class of a balanced split lands inside it.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lra import atomic

TENSORBOARD_DIR = "tensorboard"
METRICS_FILE = "metrics.jsonl"
RUN_SPLIT = "run"  # the header record: who ran (task, attention, preset, seed)
# The scalars TensorBoard gets, per split (test accuracies are single numbers: metrics.jsonl only).
TENSORBOARD_TAGS = {"train": ("loss", "accuracy", "lr", "grad_norm", "steps_per_s"),
                    "val": ("loss", "accuracy")}
# Splits written after the last checkpoint: a resumed run writes them again, so resuming drops them.
AFTER_LAST_CHECKPOINT = ("test_at_last",)
CHANCE_HELP = 'docs/running.md "If a task stays at chance"'  # where the at-chance notice points


class MetricsLog:
    """The one writer of ``metrics.jsonl`` and ``tensorboard/`` in ``workdir``.

    ``resume_step``: the step the run restarts from (0 for a new run); both logs are cut back to it.
    ``run``: the header's fields (task, attention, preset, seed). ``enabled=False`` (every process
    but process 0) writes nothing.
    """

    def __init__(self, workdir: Path, *, resume_step: int, run: dict[str, Any], enabled: bool = True,
                 tracker: Any = None):
        self.tracker = tracker if enabled else None  # lra.tracker.Wandb, or None
        self.path = Path(workdir) / METRICS_FILE
        self.events_dir = Path(workdir) / TENSORBOARD_DIR
        self.enabled = enabled
        self._writer = None
        self._window: tuple[int, float] | None = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = truncate_jsonl(self.path, resume_step)
        truncate_events(self.events_dir, resume_step)
        if not any(r.get("split") == RUN_SPLIT for r in kept):
            self._append({"step": 0, "split": RUN_SPLIT, **run})
        from tensorboardX import SummaryWriter  # only process 0 pays for the import

        # A suffix per session keeps file names unique even for two sessions in the same second.
        session = len(list(self.events_dir.glob("events.out.tfevents.*")))
        self._writer = SummaryWriter(str(self.events_dir), filename_suffix=f".{session}")

    def _append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def write(self, step: int, split: str, values: dict[str, Any]) -> None:
        """One record: a line of metrics.jsonl, and the split's scalars in TensorBoard."""
        if not self.enabled:
            return
        self._append({"step": step, "split": split, **values})
        tags = TENSORBOARD_TAGS.get(split, ())
        scalars = {name: float(values[name]) for name in tags if values.get(name) is not None}
        for name, value in scalars.items():
            self._writer.add_scalar(f"{split}/{name}", value, step)
        if tags:
            self._writer.flush()
        if self.tracker is not None:
            if tags:
                self.tracker.log(step, split, scalars)
            else:  # test accuracies: single numbers
                self.tracker.summary(split, {k: float(v) for k, v in values.items()
                                             if isinstance(v, int | float) and not isinstance(v, bool)})

    def train(self, step: int, values: dict[str, float], timed_steps: int, train_time_s: float) -> None:
        """A training record with ``steps_per_s`` over the steps since this session's previous one.

        ``timed_steps``, ``train_time_s``: the run's running count of timed steps and their seconds
        (compilation and evaluation excluded); the first record of a session has no rate.
        """
        rate = None
        if self._window is not None:
            steps, seconds = timed_steps - self._window[0], train_time_s - self._window[1]
            rate = steps / seconds if steps > 0 and seconds > 0 else None
        self._window = (timed_steps, train_time_s)
        self.write(step, "train", {**values, **({"steps_per_s": rate} if rate else {})})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None


# ----------------------------------------------------------------------------------------------
# Cutting the logs back to a checkpoint.


def _kept(record: dict[str, Any], step: int) -> bool:
    return record["step"] <= step and record["split"] not in AFTER_LAST_CHECKPOINT


def read_jsonl(path: Path, dropped: list[int] | None = None) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl; a last line cut short (a kill mid-write) is left out.

    Raises ValueError naming the file and line for a malformed line anywhere else, unless
    ``dropped`` is a list: then such lines are skipped and their numbers appended to it.
    """
    lines = Path(path).read_text(errors="replace").split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            step, _ = record["step"], record["split"]
            if isinstance(step, bool) or not isinstance(step, int):
                raise ValueError(f"step {step!r} is not an integer")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            if number == len(lines):  # no newline after it: a torn write
                break
            if dropped is None:
                raise ValueError(f"{path}:{number}: not a metrics record ({err})") from None
            dropped.append(number)
            continue
        records.append(record)
    return records


def truncate_jsonl(path: Path, step: int) -> list[dict[str, Any]]:
    """Keep the records a checkpoint at ``step`` covers (none for step 0); return them."""
    path = Path(path)
    if not path.exists():
        return []
    if step == 0:
        path.unlink()
        return []
    dropped: list[int] = []
    kept = [r for r in read_jsonl(path, dropped) if _kept(r, step)]
    if dropped:
        shown = ", ".join(map(str, dropped[:10])) + (", ..." if len(dropped) > 10 else "")
        print(f"warning: {path}: {len(dropped)} damaged line(s) dropped (line {shown}); the "
              f"{len(kept)} good records up to step {step} are kept", file=sys.stderr)
    atomic.replace(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept).encode())
    return kept


def _framed(data: bytes, pos: int, crc) -> tuple[int, bool] | None:
    """(end, payload ok) of a TFRecord record at ``pos`` whose length verifies, else None."""
    if pos + 12 > len(data):
        return None
    header = data[pos:pos + 8]
    if struct.unpack("<I", data[pos + 8:pos + 12])[0] != crc(header):
        return None
    end = pos + 12 + struct.unpack("<Q", header)[0] + 4
    if end > len(data):
        return None
    ok = struct.unpack("<I", data[end - 4:end])[0] == crc(data[pos + 12:end - 4])
    return end, ok


def _resync(data: bytes, pos: int, crc) -> int:
    """The first offset after ``pos`` where a whole record verifies (or where fewer than a header's
    12 bytes are left)."""
    pos += 1
    while pos + 12 <= len(data) and not (_framed(data, pos, crc) or (0, False))[1]:
        pos += 1
    return pos


def event_records(path: Path, damage: list[str] | None = None) -> Iterator[tuple[bytes, bytes]]:
    """(framed record, payload) for each whole record of a TFRecord file.

    A record is framed as length (8 bytes), the length's CRC, payload, the payload's CRC. A record
    whose payload CRC fails under a good length is dropped and reading goes on after it; where the
    length itself is damaged, reading resumes at the next offset where a whole record verifies.
    A torn last record (a kill mid-write) ends the file. Each drop is described in ``damage``.
    """
    from tensorboardX.record_writer import masked_crc32c

    data = Path(path).read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        found = _framed(data, pos, masked_crc32c)
        if found is None:
            start, pos = pos, _resync(data, pos, masked_crc32c)
            if pos + 12 > len(data):
                if damage is not None:
                    damage.append(f"{len(data) - start} bytes from offset {start} unreadable "
                                  f"(a torn or damaged record; nothing after it verifies)")
                return
            if damage is not None:
                damage.append(f"{pos - start} damaged bytes at offset {start} skipped")
            continue
        end, ok = found
        if ok:
            yield data[pos:end], data[pos + 12:end - 4]
        elif damage is not None:
            damage.append(f"the record at offset {pos} ({end - pos} bytes) fails its CRC")
        pos = end


def event_files(events_dir: Path) -> list[Path]:
    return sorted(Path(events_dir).glob("events.out.tfevents.*"))


def truncate_events(events_dir: Path, step: int) -> None:
    """Rewrite every event file without the events past ``step`` (delete them all for step 0)."""
    from tensorboardX.proto.event_pb2 import Event

    for path in event_files(events_dir):
        if step == 0:
            path.unlink()
            continue
        kept, damage = [], []
        for raw, payload in event_records(path, damage):
            try:
                event = Event.FromString(payload)
            except Exception:  # a payload that verifies but does not parse (another writer)
                damage.append(f"a record of {len(payload)} bytes is not an event")
                continue
            if not event.HasField("summary") or event.step <= step:
                kept.append(raw)
        # A torn last record is what a kill leaves: expected, said only when something else is.
        torn_only = len(damage) == 1 and "nothing after it verifies" in damage[0]
        if damage and not torn_only:
            print(f"warning: {path}: {len(damage)} damaged part(s) dropped ({'; '.join(damage)});"
                  f" {len(kept)} records up to step {step} are kept, those after the damage "
                  f"included", file=sys.stderr)
        atomic.replace(path, b"".join(kept))


def read_scalars(events_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} in file and write order, from every event file in ``events_dir``."""
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, list[tuple[int, float]]] = {}
    for path in event_files(events_dir):
        for _, payload in event_records(path):
            event = Event.FromString(payload)
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


# ----------------------------------------------------------------------------------------------
# The at-chance notice.


def standard_error(chance: float, examples: int) -> float:
    """Standard error of an accuracy measured on ``examples`` examples by a model at chance."""
    return math.sqrt(chance * (1.0 - chance) / max(examples, 1))


class AtChance:
    """Counts evaluations in a row within one standard error of ``chance``; says so once.

    ``patience`` <= 0 turns the notice off.
    """

    def __init__(self, chance: float, patience: int):
        self.chance, self.patience = chance, patience
        self.streak: list[int] = []  # steps of the current run of at-chance evaluations
        self.said = False

    def update(self, step: int, accuracy: float, predictions: int) -> str | None:
        """The notice (once per session) when this evaluation, of ``predictions`` predictions (the
        task's ``chance`` count: examples, or MQAR's query positions), completes ``patience`` at
        chance."""
        se = standard_error(self.chance, predictions)
        if abs(accuracy - self.chance) <= se:
            self.streak.append(step)
        else:
            self.streak = []
        if self.patience <= 0 or self.said or len(self.streak) < self.patience:
            return None
        self.said = True
        return (f"note: validation accuracy has stayed within one standard error of chance "
                f"({self.chance:.3f} ± {se:.3f}, {predictions} predictions) for {len(self.streak)} "
                f"evaluations (steps {self.streak[0]}-{step}, now {accuracy:.3f}); see "
                f"{CHANCE_HELP} (learning rate, warm-up, normalisation). "
                f"--set train.chance_patience=0 silences this.")
