"""A process's output: a bounded head and tail in memory, the whole stream spooled to a file."""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from pathlib import Path

import pegboard

__all__ = ("Capture",)


class Capture:
    """Keeps the first ``head_bytes`` and last ``tail_bytes`` of a byte stream.

    Memory stays bounded whatever the stream's size. Once the stream outgrows
    what memory keeps, everything (from its first byte) is also written to a
    new managed file in ``spool_dir`` (a `pegboard.ManagedStorage` directory,
    so the file is kept and pruned like retained output), up to
    ``spool_bytes``. What neither memory nor the spool holds is lost, and
    `lost` says exactly how many bytes that is.

    `feed` blocks on the spool's writes, so it runs in a worker thread; the
    properties may be read from another thread meanwhile.
    """

    def __init__(
        self,
        spool_dir: Path | pegboard.ManagedStorage,
        *,
        head_bytes: int,
        tail_bytes: int,
        spool_bytes: int,
    ) -> None:
        # The Location's own storage redacts the host's secrets as the file is finished.
        self._storage = (
            spool_dir
            if isinstance(spool_dir, pegboard.ManagedStorage)
            else pegboard.ManagedStorage(spool_dir)
        )
        self._head_limit = head_bytes
        self._tail_limit = tail_bytes
        self._spool_limit = spool_bytes
        self._head = bytearray()
        # Chunks after the head; whole chunks leave once the rest covers the limit.
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self._lock = threading.Lock()
        self._file: int | None = None
        self.total = 0
        self.spool: Path | None = None
        self.spooled = 0
        self.spool_error: str | None = None

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream."""
        with self._lock:
            self.total += len(chunk)
            rest = chunk
            room = self._head_limit - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                rest = chunk[room:]
            if rest:
                self._tail.append(rest)
                self._tail_size += len(rest)
            starting = (
                self.spool is None
                and self.spool_error is None
                and self.total > self._head_limit + self._tail_limit
            )
        if starting:
            # Memory alone would start losing bytes now. Nothing has left the
            # tail yet, so head and tail together are the whole stream so far.
            self._open_spool()
            if self._file is not None:
                self._write(self._head, *self._tail)
        elif self._file is not None:
            self._write(chunk)
        with self._lock:
            while self._tail and self._tail_size - len(self._tail[0]) >= self._tail_limit:
                self._tail_size -= len(self._tail.popleft())

    @property
    def head(self) -> bytes:
        """The first bytes of the stream (at most ``head_bytes``)."""
        with self._lock:
            return bytes(self._head)

    @property
    def tail(self) -> bytes:
        """The last bytes after the head (at most ``tail_bytes``)."""
        with self._lock:
            kept = b"".join(self._tail)
        return kept[len(kept) - self._tail_limit :] if len(kept) > self._tail_limit else kept

    @property
    def retained(self) -> int:
        """Bytes of the stream this capture returns from memory."""
        with self._lock:
            return len(self._head) + min(self._tail_size, self._tail_limit)

    @property
    def lost(self) -> int:
        """Bytes of the stream that neither memory nor the spool holds."""
        with self._lock:
            from_start = max(len(self._head), self.spooled)
            return max(0, self.total - min(self._tail_size, self._tail_limit) - from_start)

    def recent(self, size: int) -> bytes:
        """The last ``size`` bytes kept in memory, for a progress report."""
        with self._lock:
            parts: list[bytes] = []
            wanted = size
            for chunk in reversed(self._tail):
                parts.append(chunk[-wanted:])
                wanted -= len(parts[-1])
                if not wanted:
                    break
            if wanted and self._head:
                parts.append(bytes(self._head[-wanted:]))
        return b"".join(reversed(parts))

    def close(self) -> None:
        """Finish the spool file: it gets its name only now, whole (blocks: a worker thread)."""
        if self._file is not None and self.spool is not None:
            descriptor, self._file = self._file, None
            try:
                # Not flushed, as before: the spool outlives a killed process, and
                # waiting for a gigabyte to reach the disk would hold the call.
                self._storage.finish_sync(descriptor, self.spool, flush=False)
            except pegboard.RetentionError as error:
                self.spool_error = f"the spool file could not be kept: {error}"
                self.spool, self.spooled = None, 0

    def discard(self) -> None:
        """Close and delete the spool file: no result will name it."""
        if self._file is not None and self.spool is not None:
            descriptor, self._file = self._file, None
            self._storage.abandon_sync(descriptor, self.spool)
        elif self.spool is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.spool)

    def _open_spool(self) -> None:
        try:
            # A hidden name until it is finished: a process killed meanwhile leaves
            # nothing a Location would serve, and the next open removes it.
            self._file, self.spool = self._storage.begin_sync()
        except pegboard.RetentionError as error:
            self.spool_error = f"the spool file could not be created: {error}"

    def _write(self, *chunks: bytes | bytearray) -> None:
        assert self._file is not None
        for chunk in chunks:
            view = memoryview(chunk)[: self._spool_limit - self.spooled]
            try:
                while view:
                    written = os.write(self._file, view)
                    self.spooled += written
                    view = view[written:]
            except OSError as error:
                self.spool_error = f"writing the spool file failed: {error.strerror}"
            if self.spool_error is None and self.spooled >= self._spool_limit:
                self.spool_error = f"the spool file is full at {self._spool_limit:,} bytes"
            if self.spool_error is not None:
                self.close()
                return
