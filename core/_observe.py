"""What a confined plugin does to its process: seen in its worker, for the conformance kit.

A worker started for the kit watches the plugin (Python's audit hooks, a
watched ``os.environ`` and ``sys.stdout``, and the threads, tasks, descriptors
and working folder before and after) and reports what it saw to the host,
which judges it. The sandbox refuses the writes and connections regardless;
this is how the kit can name them to the plugin's author.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import gc
import io
import os
import select
import sys
import termios
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ("Observer", "activity")

#: What the plugin is doing in this context: importing, activating, a call, teardown.
_ACTIVITY: contextvars.ContextVar[str] = contextvars.ContextVar(
    "pegboard_activity", default="code running outside any call (a thread it started?)"
)

#: Audit events that change the file system, with the position of their path.
_FILE_EVENTS = {
    "os.mkdir": 0,
    "os.remove": 0,
    "os.rename": 0,
    "os.replace": 0,
    "os.rmdir": 0,
    "os.truncate": 0,
    "os.symlink": 1,
    "os.link": 1,
    "shutil.rmtree": 0,
    "shutil.copyfile": 1,
}
#: Audit events that reach the network: what the report says, the address's position.
_NETWORK_EVENTS = {
    "socket.connect": ("connected to", 1),
    "socket.sendto": ("sent a datagram to", 1),
    "socket.sendmsg": ("sent a message to", 1),
    "socket.getaddrinfo": ("looked up", 0),
}
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
#: The most events of one kind kept: the report needs the first few, not all.
_KEEP = 20


@contextlib.contextmanager
def activity(label: str) -> Iterator[None]:
    """Label what the plugin does inside the block."""
    token = _ACTIVITY.set(label)
    try:
        yield
    finally:
        _ACTIVITY.reset(token)


class Observer:
    """Records what the plugin does that a host would not want, for the kit to report.

    ``folders`` hold the plugin's own code: environment reads are reported only
    when made from there (libraries read optional settings all the time).
    ``allowed`` names the environment variables a confined plugin is given;
    ``network`` whether the host granted it the network.
    """

    def __init__(self, *, allowed: frozenset[str], network: bool, watching: bool = True) -> None:
        #: Whether it records (a worker for the kit). Every confined worker installs
        #: an observer, so the kit's worker looks like a host's to the plugin.
        self.watching = watching
        self._lock = threading.Lock()
        self._events: list[dict[str, str]] = []
        self._counts: dict[str, int] = {}
        self._allowed = allowed
        self._network = network
        self._temporary = os.path.realpath(os.environ.get("TMPDIR", "/tmp"))
        self.folders: tuple[str, ...] = ()
        self._fds: set[int] = set()
        self._threads: set[threading.Thread] = set()
        self._cwd = os.getcwd()
        self._observing = threading.local()
        self._relay_from = -1  # standard output's pipe, read by the relay thread
        self._relaying = False

    def install(self) -> None:
        """Start watching: audit hook, environment and standard output."""
        sys.dont_write_bytecode = True  # imports would write caches: not the plugin's doing
        sys.addaudithook(self._hook)
        os.environ = _Environ(os.environ, self)  # noqa: B003 - replaced, not cleared: reads are watched
        if os.supports_bytes_environ:
            os.environb = _Environ(os.environb, self)  # type: ignore[assignment]
        sys.stdout = _WatchedOutput(self)
        self._relay_descriptor()

    def _relay_descriptor(self) -> None:
        """Make descriptor 1 a pipe whose bytes a thread passes on to standard error.

        What reaches standard output below ``sys.stdout`` (``os.write(1, ...)``,
        ``sys.__stdout__``, ``sys.stdout.buffer``, a C library) is noted too.
        """
        read, write = os.pipe()
        os.dup2(write, 1)
        os.close(write)
        self._relay_from = read
        thread = threading.Thread(target=self._relay, name="pegboard-stdout", daemon=True)
        thread.start()

    def _relay(self) -> None:
        while True:
            select.select([self._relay_from], [], [])
            self._relaying = True  # before reading: settle_output waits for it
            try:
                data = os.read(self._relay_from, 65536)
                if not data:
                    return
                with contextlib.suppress(OSError):
                    os.write(2, data)
                if self.watching and data.strip():
                    text = data.decode("utf-8", "replace").strip()
                    where = "descriptor 1, below sys.stdout"
                    self._record("stdout", f"wrote to standard output: {text[:80]!r}", where)
            except OSError:
                return
            finally:
                self._relaying = False

    def settle_output(self) -> None:
        """Wait (at most a second) until what was written to descriptor 1 is relayed."""
        with contextlib.suppress(Exception):
            sys.__stdout__.flush()  # type: ignore[union-attr]
        deadline = time.monotonic() + 1.0
        pending = bytearray(4)
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(self._relay_from, termios.FIONREAD, pending)
            except OSError:
                return
            if not int.from_bytes(pending, sys.byteorder) and not self._relaying:
                return
            time.sleep(0.002)

    def baseline(self, folders: tuple[str, ...]) -> None:
        """Remember the process as the plugin's import left it."""
        self.folders = tuple(os.path.realpath(folder) for folder in folders)
        self._fds = _descriptors()
        self._threads = set(threading.enumerate())
        self._cwd = os.getcwd()

    def check_cwd(self) -> None:
        """Report a changed working folder (after each call and hook)."""
        now = os.getcwd()
        if now != self._cwd:
            self._record("cwd", f"changed the working directory to {now} (from {self._cwd})")
            self._cwd = now

    def after_teardown(self, tasks: list[str]) -> None:
        """Report what outlived the plugin's teardown: threads, tasks, descriptors."""
        self.check_cwd()
        for thread in threading.enumerate():
            if thread in self._threads or thread.name.startswith("AnyIO worker thread"):
                continue
            thread.join(0.2)  # one finishing as teardown ends is not left behind
            if thread.is_alive():
                self._record("thread", f"thread {thread.name!r} is still running", "teardown")
        for task in tasks:
            self._record("task", f"task {task} is still running", "teardown")
        # What teardown closed may still await the collector (a file in a cycle).
        gc.collect()
        for fd in sorted(_descriptors() - self._fds):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                self._record("fd", f"file descriptor {fd} ({target}) is still open", "teardown")

    def take(self) -> list[dict[str, str]]:
        """The events recorded since the last call, oldest first."""
        if self.watching:
            self.settle_output()
        with self._lock:
            taken, self._events = self._events, []
        return taken

    def _record(self, kind: str, what: str, where: str | None = None) -> None:
        with self._lock:
            count = self._counts.get(kind, 0)
            self._counts[kind] = count + 1
            if count < _KEEP:
                self._events.append({"kind": kind, "what": what, "where": where or _ACTIVITY.get()})

    def _hook(self, event: str, arguments: tuple[Any, ...]) -> None:
        if not self.watching or getattr(self._observing, "busy", False):
            return
        self._observing.busy = True
        try:
            self._see(event, arguments)
        except Exception:  # noqa: BLE001 - watching must never break the plugin
            pass
        finally:
            self._observing.busy = False

    def _see(self, event: str, arguments: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (*arguments, None, None, 0)[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITING
            )
            if writes and isinstance(path, str | bytes | os.PathLike):
                self._outside("wrote", path)
        elif event in _FILE_EVENTS:
            position = _FILE_EVENTS[event]
            if len(arguments) > position:
                self._outside(f"{event.split('.')[-1]} on", arguments[position])
        elif event == "os.chdir":
            self._record("cwd", f"changed the working directory to {arguments[0]!r}")
        elif event in _NETWORK_EVENTS and not self._network:
            verb, position = _NETWORK_EVENTS[event]
            address = arguments[position] if len(arguments) > position else None
            if address is not None:  # sendmsg on a connected socket names none
                self._record("network", f"{verb} {address!r} with no network granted")

    def _outside(self, verb: str, path: object) -> None:
        if not isinstance(path, str | bytes | os.PathLike):
            return  # a descriptor
        text = os.fsdecode(path)
        if text in ("/dev/null", "/dev/stdout", "/dev/stderr"):
            return
        where = os.path.realpath(text)
        if where == self._temporary or where.startswith(self._temporary + os.sep):
            return
        self._record("write", f"{verb} {text} (outside its temporary directory)")

    def environment_read(self, name: str) -> None:
        if not self.watching or name in self._allowed or getattr(self._observing, "busy", False):
            return
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__") in _PLUMBING:
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return
        caller = os.path.realpath(frame.f_code.co_filename)
        if any(caller == code or caller.startswith(code + os.sep) for code in self.folders):
            self._record("environment", f"read the environment variable {name!r}")

    def printed(self, text: str) -> None:
        if self.watching and text.strip():
            self._record("stdout", f"printed to standard output: {text.strip()[:80]!r}")


#: Modules whose frames are the machinery of an environment read, not its caller.
_PLUMBING = frozenset({"os", "_collections_abc", "collections.abc", __name__})


class _Environ(os._Environ[str]):
    """``os.environ`` (and ``os.environb``), telling the observer which names are read.

    The same class (and class name) as the environment of every confined worker,
    watched or not, so a plugin cannot tell the kit's worker from a host's by it.
    """

    def __init__(self, environ: Any, observer: Observer) -> None:
        super().__init__(
            environ._data,
            environ.encodekey,
            environ.decodekey,
            environ.encodevalue,
            environ.decodevalue,
        )
        self._observer = observer

    def __getitem__(self, name: str) -> str:
        self._observer.environment_read(os.fsdecode(name))
        value: str = super().__getitem__(name)
        return value

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str | bytes):
            self._observer.environment_read(os.fsdecode(name))
        return super().__contains__(name)


_Environ.__module__ = "os"


class _WatchedOutput(io.TextIOBase):
    """``sys.stdout`` of a confined worker: text goes to standard error (noted when watched)."""

    def __init__(self, observer: Observer) -> None:
        self._observer = observer

    def write(self, text: str) -> int:
        self._observer.printed(text)
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    @property
    def buffer(self) -> Any:
        """The bytes below: descriptor 1, relayed to standard error (noted when watched)."""
        return sys.__stdout__.buffer  # type: ignore[union-attr]


def _descriptors() -> set[int]:
    """The open file descriptors, without the one listing them."""
    try:
        listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return set()
    try:
        return {int(name) for name in os.listdir(listing)} - {listing}
    finally:
        os.close(listing)
