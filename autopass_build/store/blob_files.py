"""The store's blobs (IR, objects, archives, profiles) as files for the tools that read
files: clang, lld, llvm-ar.  A blob may be packed in the spool (compressed); a tool gets
an unpacked copy, kept for the blobs read again and again (objects, archives), made for
the length of one read for those read once (a unit's IR)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from autopass_build.capture.record.spool import PACKED, Spool
from autopass_build.core.files import write_atomic


class BlobFiles:
    """What the store (index.Store) offers of its blobs; `spool` and `dir` are its."""
    spool: Spool
    dir: str

    def blob_path(self, kind: str, digest: str, suffix: str) -> str:
        return self.spool.blob_path(kind, digest, suffix)

    def has_blob(self, kind: str, digest: str, suffix: str) -> bool:
        return self.spool.stored_blob(kind, digest, suffix) is not None

    def blob_file(self, kind: str, digest: str, suffix: str) -> str:
        """A file holding the blob's content, for tools that read files (clang, lld,
        llvm-ar): the blob itself in an older store, else a copy unpacked once under
        work/unpacked/, where later replays find it.  FileNotFoundError when the store
        does not hold it."""
        stored = self.spool.stored_blob(kind, digest, suffix)
        if stored is None:
            raise FileNotFoundError(self.blob_path(kind, digest, suffix))
        if not stored.endswith(PACKED):
            return stored
        unpacked = os.path.join(self.dir, "work", "unpacked", kind, digest + suffix)
        if not os.path.exists(unpacked):
            os.makedirs(os.path.dirname(unpacked), exist_ok=True)
            write_atomic(unpacked, self.spool.read_blob(kind, digest, suffix))
        return unpacked

    @contextlib.contextmanager
    def blob_copy(self, kind: str, digest: str, suffix: str) -> Iterator[str]:
        """A file holding the blob's content for the length of the block: the blob
        itself in an older store, else a temporary copy removed after (a unit's IR is
        read once per new object: kept unpacked, the IR would take the room again)."""
        stored = self.spool.stored_blob(kind, digest, suffix)
        if stored is None:
            raise FileNotFoundError(self.blob_path(kind, digest, suffix))
        if not stored.endswith(PACKED):
            yield stored
            return
        tmp = self.spool.new_tmp_path(suffix)
        try:
            os.makedirs(os.path.dirname(tmp), exist_ok=True)
            with open(tmp, "wb") as handle:
                handle.write(self.spool.read_blob(kind, digest, suffix))
            yield tmp
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
