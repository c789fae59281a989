"""One line instead of a traceback when ``lra`` was found only in part.

Imported first by every command (``python -m lra.<command>``) and by ``lra.bench`` and
``lra.leaderboard``. With an editable install, a folder named ``lra`` without ``__init__.py`` in the
working folder (typically a clone of this repository, run from its parent folder) is found before
the installed package and becomes a namespace package: the command's own module still comes from
the install, but ``lra.results`` and the rest resolve into that folder and fail with messages that
name nothing of the cause (``cannot import name ... (unknown location)``). Here that is caught
before anything else is imported.
"""

import sys
from pathlib import Path

import lra

if getattr(lra, "__file__", None) is None:
    _FOLDERS = ", ".join(str(Path(p).resolve()) for p in lra.__path__)
    sys.exit(f"lra: the package lra was found as the folder {_FOLDERS}, which has no __init__.py (a "
             f"clone of lra, run from the folder above it?), instead of the installed package at "
             f"{Path(__file__).resolve().parent}: run the command from another folder (for a clone: "
             f"from inside it)")
