"""Where a store's tree was recorded, and where it is now.  A tree copied or moved with
its `.autopass/` (a CI cache, a colleague's checkout) keeps the paths it recorded: they
are read as here, so its units still match the links and the sources on disk."""

from __future__ import annotations

import os

from autopass_build.core.files import write_atomic

LOCATION_NAME = "location"         # in the store: the folder its tree was recorded in


class Location:
    def __init__(self, store_dir: str):
        self.store_dir = store_dir
        self._moved: tuple[str, str] | None = None   # (recorded in, here), once read

    def moved(self) -> tuple[str, str] | None:
        """(the folder the store's tree was recorded in, where it is now) when the tree
        was copied or moved with its store since, else None.  The place is remembered
        at the first read of the index."""
        if self._moved is None:
            here = os.path.dirname(self.store_dir)
            was = here
            try:
                with open(os.path.join(self.store_dir, LOCATION_NAME), encoding="utf-8",
                          errors="surrogateescape") as handle:
                    was = handle.read().rstrip("\n") or here
            except FileNotFoundError:
                try:
                    write_atomic(os.path.join(self.store_dir, LOCATION_NAME),
                                 os.fsencode(here) + b"\n")
                except OSError:
                    pass
            except OSError:
                pass
            self._moved = (was, here)
        was, here = self._moved
        return None if was == here else (was, here)

    def here(self, path: str) -> str:
        """A recorded path, read where the tree is now."""
        moved = self.moved()
        if moved is None:
            return path
        was, here = moved
        return path.replace(was, here, 1) if path == was or path.startswith(was + os.sep) \
            else path

    def here_argv(self, argv: list[str]) -> list[str]:
        """Arguments with the recorded folder in them (-I/old/include, /old/src/x.cpp)
        read as here."""
        moved = self.moved()
        if moved is None:
            return argv
        was, here = moved
        return [token.replace(was + os.sep, here + os.sep) for token in argv]
