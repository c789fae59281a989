"""``--config FILE``: a run's config as a file, JSON or TOML, in the form ``--print-config`` prints.

    python -m lra.run --task listops --attn softmax --preset small --print-config > small.json
    python -m lra.run --config small.json                      # the same resolved config
    python -m lra.run --config small.json --set train.lr=1e-3  # --set still wins
    python -m lra.sweep --config small.json --attn softmax,s4d --seeds 0-2

A file holds any of ``task``, ``attention``, ``preset``, ``protocol``, ``seed`` (used where the
command line does not give them) and the tables ``model``, ``train``, ``data``, ``attn`` (the
config's keys). Its values are one layer of the config, above the preset and below ``--set``
(``lra.config.load``); the ``attn`` table applies to runs of the file's ``attention`` family only
and ``data`` to runs of its ``task`` (a sweep over other families or tasks leaves them out, and
says so once). ``--print-config`` lists every option with its value, defaults included: a value
equal to what the layers below already give changes nothing, so printing a config and reading it
back resolves to the same config, and the same result-file identity.

A result file records the file it was read from (``config_file``: its path and SHA-256); what
counts for identity, resume and the sweep's skip is the resolved config the file's values become,
so a resumed run whose file has other values is refused like any changed config, and a file that
moved or was reformatted changes nothing. A bad file is one line naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lra.config import ConfigError

IDENTITY = {"task": str, "attention": str, "preset": str, "protocol": str, "seed": int}
SECTIONS = ("model", "train", "data", "attn")


@dataclass(frozen=True)
class ConfigFile:
    """A read ``--config`` file: ``identity`` (its task, attention, preset, protocol, seed) and
    ``sections`` ({"model": {...}, "train": {...}, "data": {...}, "attn": {...}})."""

    path: Path
    sha256: str
    text: str
    identity: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def where(self, key: str) -> str:
        """``path:line`` of the first line that names ``key``'s last part, else ``path``."""
        name = key.rsplit(".", 1)[-1]
        pattern = re.compile(rf'(^|[\s{{,"\'])"?{re.escape(name)}"?\s*[:=]|^\s*\[\s*{re.escape(name)}\s*\]')
        for number, line in enumerate(self.text.splitlines(), 1):
            if pattern.search(line):
                return f"{self.path}:{number}"
        return str(self.path)

    def values(self, task: str, attention: str) -> dict[str, Any]:
        """{dotted key: value} for a run of ``task`` and ``attention``: the ``attn`` table only
        for the file's own family, ``data`` only for its own task (where it names one)."""
        out = {}
        for section, table in self.sections.items():
            if section == "attn" and self.identity.get("attention", attention) != attention:
                continue
            if section == "data" and self.identity.get("task", task) != task:
                continue
            out.update({f"{section}.{k}": v for k, v in table.items()})
        return out

    def left_out(self, task: str, attention: str) -> str:
        """What ``values`` leaves out for this run, as a note ('' when nothing)."""
        parts = []
        if self.sections.get("attn") and self.identity.get("attention", attention) != attention:
            parts.append(f"its attn table (options of {self.identity['attention']})")
        if self.sections.get("data") and self.identity.get("task", task) != task:
            parts.append(f"its data table (options of {self.identity['task']})")
        return f"{' and '.join(parts)} left out for {task}/{attention}" if parts else ""

    def record(self) -> dict[str, str]:
        """What a result file keeps of it."""
        return {"path": str(self.path.absolute()), "sha256": self.sha256}


def _parse(path: Path, text: str) -> Any:
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"--config {path}: not valid TOML: {err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        hint = "" if path.suffix.lower() == ".json" else " (a TOML file must end in .toml)"
        raise ConfigError(f"--config {path}:{err.lineno}:{err.colno}: not valid JSON: "
                          f"{err.msg}{hint}") from None


def read(path: Path | str) -> ConfigFile:
    """Read and check a config file's form (its values are checked as the config is resolved);
    ``ConfigError`` naming the file and the line for anything wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"--config {path}: not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"--config {path}: {err.strerror or err}") from None
    data = _parse(path, text)
    out = ConfigFile(path, hashlib.sha256(raw).hexdigest(), text)
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected an object of keys (as --print-config "
                          f"prints), got {type(data).__name__}")
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"--config {out.where(key)}: {key} must be a table of keys, got "
                                  f"{value!r}")
            out.sections[key] = dict(value)
        elif key in IDENTITY:
            kind = IDENTITY[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ConfigError(f"--config {out.where(key)}: {key} must be "
                                  f"{'a string' if kind is str else 'an integer'}, got {value!r}")
            out.identity[key] = value
        else:
            raise ConfigError(f"--config {out.where(key)}: unknown key {key!r}; choose from "
                              f"{', '.join([*IDENTITY, *SECTIONS])}")
    return out
