"""Runs one command as a child subreaper, so nothing it starts outlives it (Linux).

Usage: ``python -I -S _reaper.py GRACE DRAIN STATUS_FD PROGRAM ARG...``. Run as a
script of the standard library only: it starts before the command and must
stay cheap. A process that leaves its group (``setsid``) or is orphaned by a
double fork is re-parented here instead of to init, so it can be found. When
the command exits, what it left gets ``DRAIN`` seconds to end on its own; when
this process is told to stop (SIGTERM, SIGINT, SIGHUP) or after that, every
descendant gets SIGTERM, then SIGKILL after ``GRACE`` seconds. It exits as
the command did (the same code, or the same signal), and writes the command's
return code (negative for a signal, as Python reports it) to ``STATUS_FD``: as
the first process of a PID namespace it cannot die of a signal it sends itself.
"""

from __future__ import annotations

# `_signal`, not `signal` (nor `typing`): their imports cost more than the rest of start-up.
import _signal as signal  # type: ignore[import-not-found]
import ctypes
import os
import sys
import time

__all__ = ("main",)

PR_SET_CHILD_SUBREAPER = 36
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHED = {signal.SIGCHLD, *_STOP}
# Wait statuses of the children reaped so far, by process ID.
_statuses: dict[int, int] = {}


def main(arguments: list[str]) -> None:
    grace, drain, status_fd = float(arguments[0]), float(arguments[1]), int(arguments[2])
    command = arguments[3:]
    # Python ignores these at startup; the command must get them as a shell would.
    for number in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(number, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.close(status_fd)
        os.execvp(command[0], command)  # no subreaper: the caller's group stop still holds
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
        os.close(status_fd)
        try:
            os.execvp(command[0], command)
        except OSError as error:
            os.write(2, f"cannot start {command[0]}: {error.strerror}\n".encode())
        os._exit(127)
    if _wait_for(child):
        _settle(drain)
    _stop_all(grace)  # told to stop, or after the command: everything below goes
    status = _statuses.get(child, 0)
    os.write(status_fd, str(os.waitstatus_to_exitcode(status)).encode())
    _exit_as(status)


def _wait_for(child: int) -> bool:
    """Wait for ``child`` to exit (True), reaping others meanwhile, or to be told to stop."""
    while True:
        _reap()
        if child in _statuses:
            return True
        if signal.sigwaitinfo(_WATCHED).si_signo in _STOP:
            return False


def _reap() -> None:
    """Reap every exited child, keeping its wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _statuses[pid] = status


def _descendants() -> list[int]:
    """The live processes below this one, found through /proc's parent links."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    pending = [me]
    while pending:
        for pid in children.get(pending.pop(), ()):
            found.append(pid)
            pending.append(pid)
    return found


def _signal(pids: list[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):  # gone meanwhile, or not ours
            continue


def _settle(seconds: float) -> None:
    """Give what the command left ``seconds`` to end by itself (output still draining)."""
    deadline = time.monotonic() + seconds
    while _descendants() and time.monotonic() < deadline:
        if signal.sigtimedwait(_WATCHED, 0.02) is not None:
            _reap()


def _stop_all(grace: float) -> None:
    """SIGTERM every descendant, SIGKILL what is left after ``grace``; reap them all."""
    alive = _descendants()
    _signal(alive, signal.SIGTERM)
    _signal(alive, signal.SIGCONT)  # a stopped process handles SIGTERM only once continued
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        signal.sigtimedwait(_WATCHED, 0.02)
        _reap()
        alive = _descendants()
    while alive:  # a process may fork while it is killed: until none is left
        _signal(alive, signal.SIGKILL)
        signal.sigtimedwait(_WATCHED, 0.01)
        _reap()
        alive = _descendants()
    _reap()


def _exit_as(status: int) -> None:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128)


if __name__ == "__main__":
    main(sys.argv[1:])
