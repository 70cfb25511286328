"""The trusted filesystem service: every path stays inside the Location's root."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio.to_thread

__all__ = ("Filesystem", "OutsideLocationError")

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideLocationError(PermissionError):
    """A path leads outside the Location's root (or is not a regular file)."""


class Filesystem:
    """Confines file access to the Location's root.

    Paths are resolved against the root; ``..``, absolute paths elsewhere and
    symlinks (in any component) that lead outside are refused, and so are
    device files, FIFOs and sockets. Files are opened by walking from the root
    one component at a time without following symlinks, so a symlink swapped
    in between the check and the use is refused too. The ``readable``
    directories (the Location's own area of managed storage) can be read,
    never written, so a model can page through a retained result; nothing
    else outside the root can, other Locations' managed files included.
    """

    def __init__(self, root: Path, *, readable: Sequence[Path] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        self._readable = [Path(os.path.realpath(path)) for path in readable]

    def resolve(self, path: str | os.PathLike[str], *, write: bool = False) -> Path:
        """The real path ``path`` names, or `OutsideLocationError`.

        Relative paths are taken from the root. With ``write=False`` the
        managed output directories are allowed as well.
        """
        if "\0" in os.fspath(path):
            raise OutsideLocationError(
                f"{os.fspath(path)!r} holds a NUL character, which no file name can; "
                "use a path inside the Location"
            )
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if self._base(real, write=write) is None:
            shown = os.fspath(path)
            if real != Path(os.path.normpath(candidate)):
                raise OutsideLocationError(
                    f"{shown!r} leads to {real}, outside the Location {self.root} "
                    "(through a symlink or '..'); use a path inside the Location"
                )
            raise OutsideLocationError(
                f"{shown!r} is outside the Location {self.root}; use a path inside it"
            )
        return real

    def relative(self, path: Path) -> str:
        """``path`` as shown to a model: relative to the root when inside it."""
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return str(path)

    def _base(self, real: Path, *, write: bool) -> Path | None:
        bases = (self.root,) if write else (self.root, *self._readable)
        return next((base for base in bases if real.is_relative_to(base)), None)

    @contextlib.contextmanager
    def readable(self, directory: str | os.PathLike[str]) -> Iterator[Path]:
        """Let reads reach ``directory`` too while the context is open.

        For a trusted plugin's own retained output (a process tool's spool), so
        a model can page through it like managed output. Never writable.
        """
        real = Path(os.path.realpath(directory))
        self._readable.append(real)
        try:
            yield real
        finally:
            self._readable.remove(real)

    @contextlib.contextmanager
    def _walk_to_parent(self, real: Path, *, write: bool) -> Iterator[tuple[int, str]]:
        base = self._base(real, write=write)
        if base is None:
            raise OutsideLocationError(f"{real} is outside the Location {self.root}")
        parts = real.relative_to(base).parts
        if not parts:
            raise IsADirectoryError(f"{self.relative(real)} is a directory")
        descriptor = os.open(base, _DIRECTORY)
        try:
            for part in parts[:-1]:
                child = _open_folder(descriptor, part, real)
                os.close(descriptor)
                descriptor = child
            yield descriptor, parts[-1]
        finally:
            os.close(descriptor)

    def open_read(self, path: str | os.PathLike[str]) -> int:
        """Open a regular file for reading; return its descriptor (caller closes it)."""
        real = self.resolve(path)
        with self._walk_to_parent(real, write=False) as (parent, name):
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                descriptor = os.open(name, flags, dir_fd=parent)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link
                    raise _swapped(real, error) from error
                raise
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            os.close(descriptor)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(f"{self.relative(real)} is a directory, not a file")
            raise OutsideLocationError(
                f"{self.relative(real)} is not a regular file (a device, FIFO or socket)"
            )
        os.set_blocking(descriptor, True)
        return descriptor

    def open_directory(self, path: str | os.PathLike[str] = ".") -> int:
        """Open a directory for listing; return its descriptor (caller closes it).

        Walked from the root without following symlinks, like `open_read`, so
        ``os.scandir`` and ``dir_fd=`` opens below it stay inside the Location.
        """
        real = self.resolve(path)
        base = self._base(real, write=False)
        if real == base:
            return os.open(real, _DIRECTORY)
        with self._walk_to_parent(real, write=False) as (parent, name):
            return _open_folder(parent, name, real)

    def read_bytes_sync(self, path: str | os.PathLike[str]) -> bytes:
        """Read a whole regular file inside the Location."""
        with os.fdopen(self.open_read(path), "rb") as file:
            return file.read()

    async def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """Read a whole regular file inside the Location, in a worker thread."""
        return await anyio.to_thread.run_sync(self.read_bytes_sync, path)

    def write_bytes_sync(self, path: str | os.PathLike[str], data: bytes) -> Path:
        """Replace a file atomically and durably, creating parent folders inside the Location.

        The data and the rename are flushed to disk (fsync) before this returns.
        """
        real = self.resolve(path, write=True)
        self._make_parents(real)
        with self._walk_to_parent(real, write=True) as (parent, name):
            mode: int | None = None
            with contextlib.suppress(FileNotFoundError):
                existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISREG(existing.st_mode):
                    raise OutsideLocationError(
                        f"{self.relative(real)} exists and is not a regular file; "
                        "write to a plain file path"
                    )
                mode = stat.S_IMODE(existing.st_mode)
            # A unique temporary name in the same directory, then an atomic rename.
            temporary = f".{name}.{os.urandom(6).hex()}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            descriptor = os.open(temporary, flags, 0o644, dir_fd=parent)
            replaced = False
            try:
                with os.fdopen(descriptor, "wb") as file:
                    if mode is not None:
                        os.fchmod(file.fileno(), mode)  # a replaced script stays executable
                    file.write(data)
                    file.flush()
                    # On disk before the rename, so a crash leaves the old file
                    # or the new one, never an empty one under the old name.
                    os.fsync(file.fileno())
                os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
                replaced = True
                os.fsync(parent)  # and the rename itself, before success is reported
            finally:
                if not replaced:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary, dir_fd=parent)
        return real

    async def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> Path:
        """Replace a file atomically, in a worker thread."""
        return await anyio.to_thread.run_sync(self.write_bytes_sync, path, data)

    def _make_parents(self, real: Path) -> None:
        missing: list[Path] = []
        parent = real.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            with (
                self._walk_to_parent(folder, write=True) as (descriptor, name),
                contextlib.suppress(FileExistsError),
            ):
                os.mkdir(name, 0o755, dir_fd=descriptor)

    def directory(self, path: str | os.PathLike[str] = ".") -> Path:
        """A directory inside the Location (for a working directory or a search root)."""
        real = self.resolve(path)
        if not real.is_dir():
            if not real.exists():
                raise FileNotFoundError(f"{self.relative(real)} does not exist")
            raise NotADirectoryError(f"{self.relative(real)} is not a directory")
        return real

    def __repr__(self) -> str:
        return f"<Filesystem confined to {str(self.root)!r}>"


def _open_folder(parent: int, name: str, real: Path) -> int:
    """Open folder ``name`` under ``parent``, never through a symlink, on the way to ``real``."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except NotADirectoryError as error:
        # O_DIRECTORY | O_NOFOLLOW says ENOTDIR for a symlink and a file alike.
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if link:
            raise _swapped(real, error) from error
        raise NotADirectoryError(error.errno, f"{name!r} is not a directory", str(real)) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _swapped(real, error) from error
        raise


def _swapped(real: Path, error: OSError) -> OutsideLocationError:
    return OutsideLocationError(
        f"{real} changed while it was being opened (a component became a symlink); "
        f"refusing to follow it ({error.strerror})"
    )
