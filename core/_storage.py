"""Managed storage: where oversized tool output is retained whole."""

from __future__ import annotations

import datetime
import logging
import os
import re
import stat
import time
from pathlib import Path

import anyio.to_thread
import attrs

from ._errors import RetentionError

__all__ = ("ManagedStorage", "default_storage_directory")

logger = logging.getLogger("pegboard")

_PREFIX = "tool-output-"
# Names carry a timestamp and a random token, nothing a tool or call can steer.
_NAME = re.compile(r"tool-output-\d{8}T\d{6}-[0-9a-f]{16}\.txt\Z")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def default_storage_directory() -> Path:
    """The per-user data directory for managed output."""
    import platformdirs  # only hosts that use the default directory pay for it

    return platformdirs.user_data_path("pegboard") / "tool-output"


def _as_path(value: str | os.PathLike[str] | None) -> Path:
    return default_storage_directory() if value is None else Path(value)


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


@attrs.frozen
class ManagedStorage:
    """A directory of retained output files, owner-only, pruned after ``retention``.

    Files are created exclusively (never following a planted symlink) with mode
    0600 in a directory kept at mode 0700.
    """

    directory: Path = attrs.field(default=None, converter=_as_path, validator=_nameable)
    retention: datetime.timedelta = attrs.field(
        default=datetime.timedelta(days=7), validator=_positive
    )

    async def save(self, data: bytes) -> Path:
        """Write ``data`` to a new file and return its path; `RetentionError` if not whole."""
        return await anyio.to_thread.run_sync(self.save_sync, data)

    async def prune(self) -> int:
        """Delete retained files older than ``retention``; return how many went."""
        return await anyio.to_thread.run_sync(self._prune, time.time())

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

    def save_sync(self, data: bytes) -> Path:
        """`save`, blocking: for code already running in a worker thread."""
        self._ensure_directory()
        import secrets  # deferred like every cost a host may never pay

        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        path = self.directory / f"{_PREFIX}{stamp}-{secrets.token_hex(8)}.txt"
        try:
            descriptor = os.open(path, _FLAGS, 0o600)
        except OSError as error:
            raise RetentionError(
                f"cannot create {path} to retain {len(data):,} bytes of tool output: "
                f"{error.strerror}"
            ) from error
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(data)
        except OSError as error:
            path.unlink(missing_ok=True)  # never leave a half-written file behind
            raise RetentionError(
                f"cannot retain {len(data):,} bytes of tool output in {path}: {error.strerror}"
            ) from error
        return path

    def _prune(self, now: float) -> int:
        cutoff = now - self.retention.total_seconds()
        removed = 0
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return 0
        except OSError as error:
            # Pruning is housekeeping; a save will report the real problem.
            logger.warning("cannot prune managed storage %s: %s", self.directory, error)
            return 0
        for entry in entries:
            if not _NAME.match(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
        return removed
