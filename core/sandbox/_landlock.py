"""The Landlock backend, where bubblewrap cannot run: a policy as a ruleset for one command.

Landlock grants rights on whole folders and cannot carve a hole in one, so a
folder holding a masked path (a denied file, ``pegboard.toml``) is granted entry
by entry: it can be crossed but not listed, and takes no new files. It has no
PID namespace: the subreaper stays outside the command's domain, which (ABI 6)
may not signal it, trace it or reach processes outside.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ._policy import Policy
from ._seccomp import program

__all__ = ("MINIMUM_ABI", "abi", "arguments")

#: TCP rules arrived in ABI 4: below it the network cannot be confined.
MINIMUM_ABI = 4
_SCRIPT = Path(__file__).with_name("_landlock_exec.py")

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_MAKE_SYM, _REFER, _TRUNCATE = 1 << 12, 1 << 13, 1 << 14
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _EXECUTE | _READ_FILE | _READ_DIR
#: Devices every shell writes to.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(444, None, ctypes.c_size_t(0), 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return max(0, int(version))


def _write_rights(version: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
    rights |= _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
    if version >= 2:
        rights |= _REFER
    if version >= 3:
        rights |= _TRUNCATE
    return rights


def _decompose(root: Path, excluded: Iterable[Path], rights: int) -> list[tuple[str, int]]:
    """Rules granting ``rights`` on ``root`` except below the ``excluded`` paths.

    A folder on the way to an excluded file stays listable when reads are
    granted: listing shows names, and no excluded folder's names lie below.
    """
    inside = [path for path in excluded if path == root or path.is_relative_to(root)]
    if not inside:
        return [(str(root), rights)]
    if root in inside:
        return []
    granted: list[tuple[str, int]] = []
    if rights & _READ_DIR and not any(path.is_dir() for path in inside):
        granted.append((str(root), _READ_DIR))
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        if entry.is_symlink():
            continue  # reached through it, its target's own rule applies
        granted += _decompose(root / entry.name, inside, rights)
    return granted


def arguments(policy: Policy, argv: list[str], *, version: int, rules_file: Path) -> list[str]:
    """The command line that runs ``argv`` under ``policy`` with Landlock ``version``.

    Writes the ruleset to ``rules_file`` (read by the helper before the command starts).
    """
    write = _write_rights(version)
    masked = (*policy.hidden, *policy.read_only)
    if policy.readable is None:
        rules = _decompose(Path("/"), policy.hidden, _READ)
    else:
        rules = [
            rule
            for path in policy.readable
            if path.exists()
            for rule in _decompose(path, policy.hidden, _READ)
        ]
    for root in (*policy.writable, policy.tmpdir):
        rules += _decompose(root, masked, write | _READ)
    rules += [(str(path), _READ) for path in policy.reveal]
    rules += [(device, _READ_FILE | _WRITE_FILE) for device in _DEVICES]
    network = policy.network
    data = {
        "abi": version,
        "handled_fs": _READ | write,
        "handled_net": 0 if network or version < 4 else _BIND_TCP | _CONNECT_TCP,
        "scoped": 0 if version < 6 else _SCOPE_SIGNAL | (0 if network else _SCOPE_ABSTRACT_UNIX),
        # Without the network no socket at all: Landlock rules cover TCP only.
        "seccomp": "" if network else (program(every_family=True) or b"").hex(),
        "rules": rules,
    }
    rules_file.write_text(json.dumps(data), encoding="utf-8")
    return [sys.executable, "-I", "-S", str(_SCRIPT), str(rules_file), *argv]
