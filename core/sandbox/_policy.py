"""A sandbox policy: what one confined process tree may read, write, reach and see."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeAlias

import attrs

__all__ = ("ENVIRONMENT_ALLOWED", "Mode", "Policy", "SandboxInfo", "allowed_environment")

#: How a host asks for confinement: ``auto`` (confine where a sandbox works, ask
#: for every command where none does), ``required`` (refuse commands without one)
#: or ``off`` (run commands with the host's authority).
Mode: TypeAlias = Literal["auto", "required", "off"]

#: The variables a confined command inherits from the host; ``LC_*`` too.
ENVIRONMENT_ALLOWED = ("HOME", "LANG", "PATH", "SHELL", "TERM", "TZ", "USER")


def allowed_environment(
    environment: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allow-listed part of ``environment``, then ``extra`` (what the host passes)."""
    kept = {
        name: value
        for name, value in environment.items()
        if name in ENVIRONMENT_ALLOWED or name.startswith("LC_")
    }
    kept.update(extra or {})
    return kept


def _paths(values: object) -> tuple[Path, ...]:
    return tuple(Path(os.path.abspath(value)) for value in values)  # type: ignore[attr-defined]


def _optional_paths(values: object) -> tuple[Path, ...] | None:
    return None if values is None else _paths(values)


@attrs.frozen(kw_only=True)
class SandboxInfo:
    """Which sandbox confines a Location's commands, or why none does.

    ``kind`` is ``"bubblewrap"``, ``"landlock"`` or None; ``reason`` says in
    words why there is none (None while one works).
    """

    kind: Literal["bubblewrap", "landlock"] | None
    reason: str | None = None

    def describe(self) -> str:
        """One line for a person: the sandbox in force, or why there is none."""
        if self.kind is not None:
            return f"commands run in the {self.kind} sandbox"
        return f"no sandbox: {self.reason}"


@attrs.frozen(kw_only=True)
class Policy:
    """What one confined process tree may do; every backend enforces this one value.

    Everything is readable except ``hidden``, or with ``readable`` only those paths
    (and the process's own ``tmpdir``, ``/dev`` and ``/proc``). Writes land only in
    ``writable`` and ``tmpdir`` (seen inside as ``/tmp`` under bubblewrap), never in ``read_only``
    or ``hidden`` paths within them. The network is reachable only with
    ``network``; the environment is exactly ``environment``.
    """

    writable: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    read_only: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    hidden: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Host paths to show read-only even where the sandbox replaces what holds
    #: them (``/tmp``): the Location's managed storage, the interpreter.
    visible: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Host paths shown again, read-only, after ``hidden`` (a Location's own area of
    #: the managed storage whose other areas are hidden).
    reveal: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: When set, the only host paths the process tree can read (a plugin worker's
    #: Python installation); ``None`` leaves the whole filesystem readable.
    readable: tuple[Path, ...] | None = attrs.field(default=None, converter=_optional_paths)
    network: bool = False
    environment: Mapping[str, str] = attrs.field(factory=dict)
    tmpdir: Path
