"""Files written whole or not at all, with the mode a plain ``open()`` gives (the umask's).

    atomic.replace(path, data)    # readers see the old bytes or the new, never a part
    atomic.create(path, data)     # FileExistsError if ``path`` exists; never replaces a file

Both write a temporary file beside ``path`` and publish it in one step (a rename, or a hard link
for ``create``), so a kill, a signal or a full disk never leaves a cut-short file under the name.
``tempfile.mkstemp`` makes its file 0600; it is set to ``0o666 & ~umask`` before it is published,
so that a result file, a table or a figure is readable by whoever the user's umask lets read it.
Standard library only: the leaderboard, which must not import JAX, writes through it too.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publish(path: Path, data: bytes, publish: Callable[[str, Path], None]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        publish(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` at once, replacing what was there."""
    _publish(path, data, os.replace)


def create(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, which must not exist (``FileExistsError``), at once."""
    _publish(path, data, os.link)
