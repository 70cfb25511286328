"""Managed storage: where oversized tool output is retained whole."""

from __future__ import annotations

import datetime
import errno
import hashlib
import logging
import math
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path

import anyio.to_thread
import attrs

from ._errors import RetentionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._secrets import Secrets

__all__ = ("ManagedStorage", "default_storage_directory")

logger = logging.getLogger("pegboard")

_PREFIX = "tool-output-"
_STAMP = "%Y%m%dT%H%M%S"
# Names carry a UTC timestamp and a random token, nothing a tool or call can
# steer; pruning reads the age from the name, so it never stats a file.
_NAME = re.compile(r"tool-output-\d{8}T\d{6}-[0-9a-f]{16}\.txt\Z")
# A file is written under a hidden name that _NAME never matches and takes its
# final name only once whole: a writer killed midway leaves no file that could
# pass for complete, only one of these for the prune to remove.
_PENDING = re.compile(r"\.tool-output-\d{8}T\d{6}-[0-9a-f]{16}\.txt\.partial\Z")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_NO_LINKS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: The prune stamp: created or reopened, never through a symbolic link.
_STAMP_FLAGS = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: An area is listed at most this many times per retention period.
PRUNE_SCANS = 64
#: When this process last listed each directory to prune it.
_PRUNED: dict[Path, float] = {}
#: The file in each area whose modification time says when any process last
#: listed it: a command that opens a Location and exits, run again and again,
#: lists a large area only as often as one long-lived process would.
PRUNE_STAMP = ".pruned"
#: Seconds a pending file that no writer holds is spared: its writer locks it
#: just after creating it, so in between it looks abandoned.
PENDING_GRACE = 60.0


def default_storage_directory() -> Path:
    """The per-user data directory for managed output."""
    import platformdirs  # only hosts that use the default directory pay for it

    return platformdirs.user_data_path("pegboard") / "tool-output"


def _as_path(value: str | os.PathLike[str] | None) -> Path:
    if value is None:
        return default_storage_directory()
    if not os.fspath(value):
        # Path("") is the current folder: an unset variable must not put storage there.
        raise ValueError(
            "managed storage directory is an empty path; give a folder, or None for the "
            "per-user default"
        )
    return Path(value)


def _nameable(_: object, __: attrs.Attribute[Path], value: Path) -> None:
    # Previews name the file on one line within the output limits.
    text = str(value)
    if len(text.encode("utf-8", "surrogateescape")) > 512 or not text.isprintable():
        raise ValueError(
            f"managed storage directory {text!r} must be a printable path of at most "
            "512 bytes: previews name their files within the output limits"
        )


def _positive(_: object, attribute: attrs.Attribute[datetime.timedelta], value: object) -> None:
    if not isinstance(value, datetime.timedelta) or value <= datetime.timedelta(0):
        raise ValueError(f"{attribute.name} must be a positive datetime.timedelta, got {value!r}")


def location_area(root: Path) -> str:
    """The name of the folder that holds one Location's managed files: a digest of its root."""
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:32]


@attrs.frozen
class ManagedStorage:
    """A directory of retained output files, owner-only, pruned after ``retention``.

    Files are created exclusively (never following a planted symlink) with mode
    0600 in a directory kept at mode 0700, written under a hidden ``.partial``
    name, flushed to disk (fsync) and only then given their final name, before
    ``save`` returns: a writer killed midway never leaves a short file under a
    managed name. Each file's name carries its UTC creation time, which is
    what ``prune`` reads. ``host.location()`` gives every Location its own
    area, ``storage.for_location(root)``: a sub-folder named by a digest of the
    Location's root.
    """

    directory: Path = attrs.field(default=None, converter=_as_path, validator=_nameable)
    retention: datetime.timedelta = attrs.field(
        default=datetime.timedelta(days=7), validator=_positive
    )
    #: The host's secrets: a file streamed in (`begin_sync`) is redacted before it
    #: gets its name. Set by ``host.location()``.
    secrets: Secrets | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)

    def for_location(self, root: str | os.PathLike[str]) -> ManagedStorage:
        """The same storage narrowed to the area of the Location at ``root`` (a real path).

        The same root always maps to the same area, so a Location opened again
        finds the files it retained before; different roots never share one.
        """
        return attrs.evolve(self, directory=self.directory / location_area(Path(root)))

    async def save(self, data: bytes) -> Path:
        """Write ``data`` to a new file and return its path; `RetentionError` if not whole."""
        return await anyio.to_thread.run_sync(self.save_sync, data)

    async def prune(self, *, force: bool = False) -> int:
        """Delete this directory's retained files older than ``retention``; return how many went.

        The age is the timestamp in each file's name. Hidden ``.partial`` files
        that no live process is writing (their writer was killed) go too, once
        untouched for `PENDING_GRACE` seconds. Nothing else is touched: not
        other names, not symlinks, not sub-folders (other Locations' areas).
        Listing a directory of many files costs, and every Location opened
        prunes its area, so an area is listed at most once per 1/`PRUNE_SCANS`
        of the retention, by any process: the modification time of its
        `PRUNE_STAMP` file says when it last was (a file outlives its retention
        by at most that). ``force=True`` lists it now.
        """
        return await anyio.to_thread.run_sync(self._prune, time.time(), force)

    def _ensure_directory(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.directory.stat()
        except OSError as error:
            raise RetentionError(
                f"cannot create managed storage directory {self.directory}: {error.strerror}; "
                "pass a writable storage= directory to host.location()"
            ) from error
        if info.st_uid != os.getuid():
            raise RetentionError(
                f"managed storage directory {self.directory} belongs to another user; "
                "pass a directory of your own as storage="
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            self.directory.chmod(0o700)

    def create_sync(self) -> tuple[int, Path]:
        """Create a new, empty managed file; return its open descriptor (write-only) and path.

        For a trusted plugin that streams output into managed storage: the
        file is pruned and readable like any other. It has its final name from
        the start, so a process killed while writing leaves it short; prefer
        `begin_sync`. The caller writes and closes the descriptor;
        `RetentionError` if the file cannot be created.
        """
        return self._create(pending=False)

    def begin_sync(self) -> tuple[int, Path]:
        """Create a new managed file under a hidden name; return its descriptor and final path.

        For a trusted plugin that streams output into managed storage (the
        bash tool's spool). The caller writes to the descriptor (write-only),
        then hands it to `finish_sync`, which gives the file the returned path,
        or to `abandon_sync`, which deletes it. Until then no listing shows the
        file under a managed name, and if the process dies first the prune
        removes it. `RetentionError` if the file cannot be created.
        """
        return self._create(pending=True)

    def finish_sync(self, descriptor: int, path: Path, *, flush: bool = True) -> None:
        """Close a file from `begin_sync` and give it its final ``path``.

        With ``flush`` it is first written to disk (fsync), as `save` does, so it
        survives a power loss too; without, it survives its process (the kernel
        keeps what was written), for a stream too large to wait for. Blocks on
        the disk: call it from a worker thread. `RetentionError` if the file
        cannot be kept whole; it is deleted then.
        """
        pending = _pending(path)
        try:
            try:
                if self.secrets:
                    # Rewritten redacted under the pending name, then held again.
                    written, descriptor = descriptor, -1
                    os.close(written)
                    self.secrets.redact_file(pending)
                    descriptor = os.open(pending, os.O_RDONLY | os.O_NOFOLLOW)
                    _lock(descriptor)
                if flush:
                    os.fsync(descriptor)
                self._publish(pending, path)
            finally:
                if descriptor >= 0:
                    os.close(descriptor)
        except OSError as error:
            pending.unlink(missing_ok=True)
            raise RetentionError(
                f"cannot retain tool output in {path}: {error.strerror}"
            ) from error

    def abandon_sync(self, descriptor: int, path: Path) -> None:
        """Close and delete a file from `begin_sync`: no result will name ``path``."""
        os.close(descriptor)
        _pending(path).unlink(missing_ok=True)

    def _create(self, *, pending: bool) -> tuple[int, Path]:
        self._ensure_directory()
        import secrets  # deferred like every cost a host may never pay

        stamp = time.strftime(_STAMP, time.gmtime())
        path = self.directory / f"{_PREFIX}{stamp}-{secrets.token_hex(8)}.txt"
        created = _pending(path) if pending else path
        try:
            descriptor = os.open(created, _FLAGS, 0o600)
        except OSError as error:
            raise RetentionError(
                f"cannot create {created} in managed storage: {error.strerror}"
            ) from error
        if pending:
            _lock(descriptor)
        return descriptor, path

    def _publish(self, pending: Path, path: Path) -> None:
        """Give a whole pending file its final name, never replacing what holds that name."""
        try:
            # A link, unlike a rename, refuses a name that exists (a planted
            # symlink, say); a crash in between leaves a pending name to prune.
            os.link(pending, path, follow_symlinks=False)
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            os.replace(pending, path)  # a file system without hard links
        try:
            pending.unlink(missing_ok=True)
            _sync_directory(self.directory)
        except OSError:
            path.unlink(missing_ok=True)  # a name that may not survive a crash is no promise
            raise

    def save_sync(self, data: bytes) -> Path:
        """`save`, blocking: for code already running in a worker thread."""
        return self.save_chunks_sync((data,))

    def save_chunks_sync(self, chunks: Iterable[bytes]) -> Path:
        """`save_sync` of the concatenated ``chunks``, written as they come.

        A large output is written without a whole encoded copy: the caller
        encodes one chunk at a time. An exception raised by ``chunks`` deletes
        the file and propagates unchanged.
        """
        descriptor, path = self.begin_sync()
        pending = _pending(path)
        size = 0
        try:
            with os.fdopen(descriptor, "wb") as file:
                for chunk in chunks:
                    file.write(chunk)
                    size += len(chunk)
                file.flush()
                # A preview that names the file is a promise the file holds it all.
                os.fsync(file.fileno())
                self._publish(pending, path)  # still locked: never seen abandoned
        except OSError as error:
            pending.unlink(missing_ok=True)  # never leave a half-written file behind
            raise RetentionError(
                f"cannot retain tool output in {path} ({size:,} bytes written): {error.strerror}"
            ) from error
        except BaseException:
            pending.unlink(missing_ok=True)
            raise
        return path

    def _prune(self, now: float, force: bool = False) -> int:
        retention = self.retention.total_seconds()
        if not force:
            # This process's own memory first (no stat), then the stamp any process left.
            since = retention / PRUNE_SCANS
            if 0 <= now - _PRUNED.get(self.directory, -math.inf) < since:
                return 0
            stamped = self._stamped()
            if 0 <= now - stamped < since:
                _PRUNED[self.directory] = stamped
                return 0
        cutoff = time.strftime(_STAMP, time.gmtime(now - retention))
        removed = 0
        try:
            entries = os.scandir(self.directory)
        except FileNotFoundError:
            return 0
        except OSError as error:
            # Pruning is housekeeping; a save will report the real problem.
            logger.warning("cannot prune managed storage %s: %s", self.directory, error)
            return 0
        start, end = len(_PREFIX), len(_PREFIX) + len(cutoff)
        with entries:
            for entry in entries:
                name = entry.name
                if name[:1] == ".":
                    if (
                        _PENDING.match(name)
                        and entry.is_file(follow_symlinks=False)
                        and _remove_abandoned(entry.path, now, retention)
                    ):
                        removed += 1
                    continue
                # Timestamps of one fixed width compare as strings, so a current
                # file costs one slice; is_file without following links needs no
                # stat where the OS reports the type.
                if name[start:end] >= cutoff or not _NAME.match(name):
                    continue
                if entry.is_file(follow_symlinks=False):
                    try:
                        os.unlink(entry.path)
                    except FileNotFoundError:
                        continue  # pruned meanwhile by the same Location opened elsewhere
                    removed += 1
        _PRUNED[self.directory] = now
        self._stamp(now)
        return removed

    def _stamped(self) -> float:
        """When the stamp says the area was last listed; -inf if it cannot say."""
        try:
            info = os.stat(self.directory / PRUNE_STAMP, follow_symlinks=False)
        except OSError:
            return -math.inf  # never listed, or unreadable: list now
        return info.st_mtime if stat.S_ISREG(info.st_mode) else -math.inf

    def _stamp(self, now: float) -> None:
        try:
            descriptor = os.open(self.directory / PRUNE_STAMP, _STAMP_FLAGS, 0o600)
            try:
                os.utime(descriptor, (now, now))
            finally:
                os.close(descriptor)
        except OSError as error:
            # Housekeeping: without the stamp, other processes just list again.
            logger.debug("cannot stamp managed storage %s: %s", self.directory, error)


def _sync_directory(directory: Path) -> None:
    """Flush a directory's entries, so a new file's name survives a crash too."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


#: The errors of a file system that cannot make hard links.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP})


def _pending(path: Path) -> Path:
    """The hidden name a file is written under before it takes ``path``."""
    return path.with_name(f".{path.name}.partial")


def _lock(descriptor: int) -> None:
    """Hold a pending file locked while its writer lives, so the prune spares it."""
    import fcntl

    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        # No flock on this file system: the prune cannot take the lock either,
        # so it waits for the retention instead.
        logger.debug("cannot lock pending managed file: %s", error)


def _remove_abandoned(path: str, now: float, retention: float) -> bool:
    """Delete a pending file whose writer is gone; return whether it went.

    The kernel drops a writer's lock when its process ends however it ends
    (kill -9 included), so a pending file nobody holds locked is a leftover,
    unless it was written to within `PENDING_GRACE` (created but not yet
    locked). Asking the lock is exact where a process ID or an age would
    guess: IDs are reused and do not cross containers, and a slow writer may
    be old. What is still locked goes only once older than the retention.
    """
    import fcntl

    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NO_LINKS)
    except OSError:
        return False  # gone meanwhile, or not ours to read
    try:
        age = now - os.fstat(descriptor).st_mtime
        if age < retention:
            if age < PENDING_GRACE:
                return False
            try:
                fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return False  # its writer lives (or the file system cannot say)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True
    finally:
        os.close(descriptor)
