"""Name -> class registries filled by decorators in the files of a package, found without a list.

Used by ``attention`` (families) and ``tasks``: every module of the package whose name does not
start with ``_`` is imported the first time a name is looked up, so dropping a file in is enough.
An entry-point group lets packages outside this tree add entries too.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path


class UnknownNameError(KeyError):
    """A name nobody registered; the message lists the valid names and close matches."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry:
    def __init__(self, kind: str, package: str, path: Iterable[str], *,
                 entry_point_group: str | None = None, error: type[KeyError] = UnknownNameError):
        self.kind, self.package, self.path = kind, package, list(path)
        self.entry_point_group, self.error = entry_point_group, error
        self._entries: dict[str, type] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator: make ``cls`` available as ``name``."""

        def wrap(cls: type) -> type:
            existing = self._entries.get(name)
            if existing is not None and existing.__qualname__ != cls.__qualname__:
                raise ValueError(f"{self.kind} {name!r} is registered twice: by {existing.__module__}."
                                 f"{existing.__qualname__} and by {cls.__module__}.{cls.__qualname__}")
            self._entries[name] = cls
            return cls

        return wrap

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        for info in pkgutil.iter_modules(self.path):
            if info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{self.package}.{info.name}")
            except Exception as err:  # a broken file must say which file it is
                raise ImportError(f"{self.kind} file {Path(info.module_finder.path) / info.name}.py "
                                  f"({self.package}.{info.name}) failed to import: "
                                  f"{err!r}") from err
        if self.entry_point_group:
            for ep in metadata.entry_points(group=self.entry_point_group):
                try:
                    obj = ep.load()
                except Exception as err:
                    raise ImportError(f"entry point {ep.name!r} = {ep.value!r} in group "
                                      f"{self.entry_point_group!r} failed to load: {err!r}") from err
                if isinstance(obj, type) and ep.name not in self._entries:
                    self.register(ep.name)(obj)

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._entries)

    def get(self, name: str) -> type:
        self._discover()
        try:
            return self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._entries, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise self.error(f"unknown {self.kind} {name!r}.{hint} "
                             f"Available: {', '.join(sorted(self._entries))}") from None
