"""Noticing I/O while a piece of plugin code runs, through Python's audit hooks."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ("io_during",)

#: Audit events that mean a file, a process or the network was touched.
_IO_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "os.mkdir",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.system",
        "os.truncate",
        "shutil.copyfile",
        "shutil.rmtree",
        "socket.connect",
        "socket.getaddrinfo",
        "sqlite3.connect",
        "subprocess.Popen",
    }
)
_RECORDING: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "pegboard_check_io", default=None
)
_installed = False


def _hook(event: str, arguments: tuple[Any, ...]) -> None:
    seen = _RECORDING.get()
    if seen is not None and event in _IO_EVENTS:
        first = arguments[0] if arguments else ""
        seen.append(f"{event} {first!r}" if isinstance(first, str | bytes) else event)


@contextlib.contextmanager
def io_during() -> Iterator[list[str]]:
    """Collect the I/O audit events raised by this thread inside the block.

    An audit hook cannot be removed once added, so one hook is added for the
    life of the process and records only while a block like this is open.
    """
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    seen: list[str] = []
    token = _RECORDING.set(seen)
    try:
        yield seen
    finally:
        _RECORDING.reset(token)
