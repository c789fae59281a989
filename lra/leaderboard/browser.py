"""A headless chromium for the web page: the DOM after its scripts ran (the browser test) and a
PNG of it (``python -m lra.leaderboard --screenshot``). Debian's ``chromium`` package, or any
Chrome-like browser on PATH; nothing here talks to a network."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120


class BrowserError(RuntimeError):
    """No browser, or the browser failed; the message says which and why."""


def find() -> str | None:
    """The path of a headless-capable browser on PATH (``LRA_CHROMIUM`` first), or None."""
    wanted = os.environ.get("LRA_CHROMIUM")
    if wanted:
        return shutil.which(wanted)
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _url(page: Path, anchor: str = "", query: str = "") -> str:
    return (Path(page).resolve().as_uri() + (f"?{query}" if query else "")
            + (f"#{anchor.lstrip('#')}" if anchor else ""))


def _run(args: list[str], what: str) -> subprocess.CompletedProcess:
    exe = find()
    if exe is None:
        raise BrowserError(f"no chromium on PATH (looked for {', '.join(NAMES)}; Debian: "
                           f"apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="lra-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S,
                                  env={**os.environ, "HOME": profile})
        except subprocess.TimeoutExpired:
            raise BrowserError(f"{exe} did not finish {what} in {TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise BrowserError(f"{exe} failed {what} (exit {done.returncode}): {' | '.join(tail)}")
    return done


def dump_dom(page: Path, anchor: str = "", *, query: str = "", size: tuple[int, int] = (1280, 800),
             wait_ms: int = 0) -> str:
    """The page's DOM (HTML) once it has loaded and its scripts have run; ``wait_ms``: virtual
    time the page is given first (timers and promises run, nothing waits in real time)."""
    wait = [f"--virtual-time-budget={wait_ms}"] if wait_ms else []
    done = _run([f"--window-size={size[0]},{size[1]}", *wait, "--dump-dom", _url(page, anchor, query)],
                "dumping the DOM")
    return done.stdout.decode("utf-8")


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1280, 800), *, anchor: str = "") -> None:
    """A PNG of the page at a window of ``size`` (width, height) pixels."""
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", _url(page, anchor)],
         "taking the screenshot")
    if not png.is_file():
        raise BrowserError(f"the browser wrote no {png}")
