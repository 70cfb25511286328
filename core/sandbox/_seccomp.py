"""A seccomp filter for confined commands without the network: no Unix socket of their own.

A network namespace cuts IP and abstract sockets, but a socket file on a readable
path (an ssh agent, a container engine, D-Bus) is reached by ``connect`` with no
write access: the only kernel rule that holds is to refuse creating the socket.
``socketpair`` stays allowed (it reaches nothing outside). io_uring is refused too,
since it creates sockets without the ``socket`` system call.
"""

from __future__ import annotations

import functools
import os
import platform
import struct
from pathlib import Path

__all__ = ("filter_file", "program")

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM = 1
_AF_UNIX = 1
#: (audit architecture, socket, io_uring_setup) by machine.
_MACHINES = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}


def program(*, every_family: bool = False) -> bytes | None:
    """The filter for this machine (None where none is known): no Unix socket, or with
    ``every_family`` no socket at all (where no network namespace cuts the rest)."""
    machine = _MACHINES.get(platform.machine())
    if machine is None:
        return None
    return _program(*machine, every_family=every_family)


def _program(arch: int, socket: int, io_uring: int, *, every_family: bool) -> bytes:
    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    refuse = op(_RET, 0, 0, _ERRNO | _EPERM)
    return b"".join(
        [
            op(_LD_W_ABS, 0, 0, 4),  # 0: the architecture
            op(_JEQ, 1, 0, arch),  # 1: native: go on
            refuse,  # 2: another ABI (i386, x32 numbering below): nothing at all
            op(_LD_W_ABS, 0, 0, 0),  # 3: the system call's number
            op(_JGE, 5, 0, 0x40000000),  # 4: x32 numbers: refuse
            op(_JEQ, 4, 0, io_uring),  # 5: io_uring_setup: refuse
            op(_JEQ, 0, 4, socket),  # 6: socket: look at its family, else allow
            op(_LD_W_ABS, 0, 0, 16),  # 7: args[0], the family (low word)
            # 8: AF_UNIX (or, with every_family, any family): refuse
            op(_JEQ, 1, 0, _AF_UNIX) if not every_family else op(_JGE, 1, 0, 0),
            op(_RET, 0, 0, _ALLOW),  # 9
            refuse,  # 10
            op(_RET, 0, 0, _ALLOW),  # 11
        ]
    )


@functools.cache
def filter_file() -> Path | None:
    """A file holding the compiled filter for this machine, or None where none is known."""
    compiled = program()
    if compiled is None:
        return None
    import tempfile  # only where a folder is made: start-up stays lean

    folder = Path(tempfile.mkdtemp(prefix="pegboard-seccomp-"))
    path = folder / "no-unix-sockets.bpf"
    path.write_bytes(compiled)
    os.chmod(path, 0o444)
    import atexit
    import shutil

    atexit.register(shutil.rmtree, folder, True)
    return path
