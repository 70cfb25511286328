"""Applies a Landlock ruleset and a seccomp filter to this process, then runs a command.

Usage: ``python -I -S _landlock_exec.py POLICY_JSON PROGRAM ARG...``. Run as a
script of the standard library only, between the subreaper and the command: the
rules bind this process and everything it starts, and cannot be lifted. The
JSON holds the ABI to use, ``rules`` (``[path, rights]``), the handled rights,
the scopes and the filter's bytes (hex). Exits 126 naming the error when any
step fails: a command never runs with less confinement than asked.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import struct
import sys

__all__ = ("main",)

_CREATE, _ADD, _RESTRICT = 444, 445, 446
_PATH_BENEATH = 1
#: Rights a rule on a file (not a folder) may carry: execute, write, read, truncate, ioctl.
_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def main(arguments: list[str]) -> None:
    with open(arguments[0], encoding="utf-8") as file:
        policy = json.load(file)
    command = arguments[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attributes = struct.pack("=QQQ", policy["handled_fs"], policy["handled_net"], policy["scoped"])
    size = 24 if policy["abi"] >= 6 else 16
    buffer = ctypes.create_string_buffer(attributes[:size], size)
    ruleset = libc.syscall(_CREATE, buffer, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail("cannot create a Landlock ruleset", ctypes.get_errno())
    for path, rights in policy["rules"]:
        try:
            descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile: nothing to grant
        if not stat.S_ISDIR(os.fstat(descriptor).st_mode):
            rights &= _FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, descriptor), 12)
        if libc.syscall(_ADD, ruleset, _PATH_BENEATH, rule, 0) != 0:
            _fail(f"cannot grant {path}", ctypes.get_errno())
        os.close(descriptor)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("cannot set no_new_privs", ctypes.get_errno())
    if libc.syscall(_RESTRICT, ruleset, 0) != 0:
        _fail("cannot restrict this process", ctypes.get_errno())
    program = bytes.fromhex(policy["seccomp"])
    if program:
        filters = ctypes.create_string_buffer(program, len(program))
        fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(filters))
        header = ctypes.create_string_buffer(fprog, len(fprog))
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, header, 0, 0) != 0:
            _fail("cannot install the seccomp filter", ctypes.get_errno())
    os.close(ruleset)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        os.write(2, f"cannot start {command[0]}: {error.strerror}\n".encode())
    os._exit(127)


def _fail(what: str, number: int) -> None:
    os.write(2, f"pegboard sandbox (landlock): {what}: {os.strerror(number)}\n".encode())
    os._exit(126)


if __name__ == "__main__":
    main(sys.argv[1:])
