"""Paths a model names: confined by the filesystem service, refused in words it can act on."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import pegboard

__all__ = ("approval_patterns", "ask_about_path", "escape", "failure", "resolve")


def escape(text: str) -> str:
    """``text`` as a pattern that matches exactly it: ``*``, ``?`` and ``\\`` escaped."""
    return re.sub(r"([*?\\])", r"\\\1", text)


def resolve(filesystem: pegboard.Filesystem, path: str, *, write: bool = False) -> Path:
    """The real path ``path`` names inside the Location, or a `pegboard.ToolFailure`."""
    try:
        return filesystem.resolve(path, write=write)
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        raise failure(error, path, filesystem) from None


def failure(
    error: OSError | ValueError, path: str | Path, filesystem: pegboard.Filesystem
) -> pegboard.ToolFailure:
    """A model-facing failure for an error met while using ``path``."""
    shown = filesystem.relative(path) if isinstance(path, Path) else path
    root = filesystem.root
    if isinstance(error, pegboard.OutsideLocationError):
        return pegboard.ToolFailure(str(error))
    if isinstance(error, FileNotFoundError):
        return pegboard.ToolFailure(
            f"{shown!r} does not exist in the Location {root}; check the path (glob finds files)"
        )
    if isinstance(error, IsADirectoryError):
        return pegboard.ToolFailure(
            f"{shown!r} is a directory, not a file; use glob to list what it holds"
        )
    if isinstance(error, NotADirectoryError):
        return pegboard.ToolFailure(
            f"{shown!r} is not a directory (or a file stands where a folder of it should be); "
            "check the path"
        )
    if isinstance(error, PermissionError):
        return pegboard.ToolFailure(f"the operating system refused access to {shown!r}")
    if isinstance(error, ValueError):
        return pegboard.ToolFailure(f"{shown!r} is not a usable path: {error}")
    reason = error.strerror or str(error)
    return pegboard.ToolFailure(f"cannot use {shown!r}: {reason}")


def approval_patterns(shown: str, *, directory: bool) -> tuple[str, ...]:
    """What answering "always" approves: the folder that holds ``shown``, and below it.

    Never ``*``: at the root, only what was asked about (the root itself, or
    that one file), so one "always" never approves the whole Location.
    """
    folder = shown if directory else posixpath.dirname(shown)
    if folder in ("", "."):
        return (escape(shown),)
    return (escape(folder), f"{escape(folder)}/*")


async def ask_about_path(
    permissions: pegboard.Permissions,
    action: str,
    shown: str,
    *,
    directory: bool,
    metadata: dict[str, Any],
) -> None:
    """Ask permission for ``action`` on one path, shown as the model sees it."""
    await permissions.ask(
        pegboard.PermissionRequest(
            action=action,
            resources=[shown],
            always=approval_patterns(shown, directory=directory),
            metadata=metadata,
        )
    )
