"""Running ripgrep: the packaged rg binary, its output streamed, its process never left running."""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import attrs

import pegboard

__all__ = ("BASE_OPTIONS", "Lines", "Long", "Run", "binary", "decode", "run")

#: What every search passes: only .gitignore files below the search root
#: decide (never a config file, global excludes or files above the root),
#: hidden files are searched, .git never, and symlinks are not followed
#: (ripgrep's default; -L/--follow is never passed).
BASE_OPTIONS = (
    "--no-config",
    "--hidden",
    "--no-ignore-dot",
    "--no-ignore-exclude",
    "--no-ignore-global",
    "--no-ignore-parent",
    "--no-require-git",
    "--glob=!.git",
)
#: A JSON message longer than this is never held whole: a match on a
#: one-line gigabyte file keeps its head and its line number only.
MAX_MESSAGE = 1 << 20
#: How much of an overlong message is kept.
_HEAD = 64 << 10
_READ = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux's fcntl.F_SETPIPE_SZ (named there from Python 3.10)
_STDERR = 4096
_LONG_MATCH = re.compile(
    rb'\{"type":"match","data":\{"path":\{"(?:text|bytes)":"(?:[^"\\]|\\.)*"\},'
    rb'"lines":\{"(text|bytes)":"'
)
_LINE_NUMBER = re.compile(rb'^\},"line_number":(\d+|null)[,}]')


@functools.cache
def binary() -> str:
    """The rg executable: the one the ``ripgrep`` package installed, else one on PATH."""
    # Imported on the first search, not when the tools are built: it costs start-up.
    import importlib.metadata

    try:
        files = importlib.metadata.distribution("ripgrep").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name in ("rg", "rg.exe"):
            path = Path(str(file.locate()))
            if os.access(path, os.X_OK):
                return str(path.resolve())
    found = shutil.which("rg")
    if found is None:
        raise pegboard.ToolFailure(
            "glob and grep need ripgrep's rg program, and neither the 'ripgrep' Python package "
            "nor PATH provides one: install it with pip install 'ripgrep>=14,<15' (or your "
            "system's ripgrep package)"
        )
    return found


@attrs.frozen
class Long:
    """A match message too long to hold: its start, and the line number from after the text."""

    head: bytes
    encoding: str  # "text" or "bytes": how the line is given
    text: bytes  # the start of the line, still JSON-escaped (or base64)
    text_bytes: int  # how long the line is, in escaped bytes
    line_number: int | None


class Lines:
    """Splits rg's output into messages, never holding one longer than `MAX_MESSAGE`."""

    def __init__(self, limit: int | None = None, *, separator: bytes = b"\n") -> None:
        self._limit = MAX_MESSAGE if limit is None else limit
        self._separator = separator
        self._buffer = bytearray()
        self._long: _LongScan | None = None

    def feed(self, chunk: bytes) -> list[bytes | Long]:
        out: list[bytes | Long] = []
        while chunk:
            if self._long is not None:
                done, chunk = self._long.feed(chunk)
                if done:
                    out.append(self._long.result())
                    self._long = None
                continue
            end = chunk.find(self._separator)
            if end < 0:
                self._buffer += chunk
                chunk = b""
                if len(self._buffer) > self._limit:
                    self._long = _LongScan(bytes(self._buffer))
                    self._buffer.clear()
                continue
            if len(self._buffer) + end > self._limit:
                scan = _LongScan(bytes(self._buffer) + chunk[:end])
                scan.feed(b"\n")
                out.append(scan.result())
                self._buffer.clear()
            elif self._buffer:
                self._buffer += chunk[:end]
                out.append(bytes(self._buffer))
                self._buffer.clear()
            else:
                out.append(chunk[:end])
            last = chunk.rfind(self._separator)
            if last > end and len(chunk) <= self._limit:
                # Whole messages in between, none longer than the limit: split at once.
                out.extend(chunk[end + 1 : last].split(self._separator))
                end = last
            chunk = chunk[end + 1 :]
        return out


class _LongScan:
    """Follows an overlong message to its end, keeping only what a match report needs."""

    def __init__(self, start: bytes) -> None:
        self.head = start[:_HEAD]
        match = _LONG_MATCH.match(start)
        self.encoding = "text"
        self.text_start = 0
        self.state = "skip"  # "string" -> "after" -> "skip"
        self.escaped_bytes = 0
        self.backslashes = 0
        self.after = b""
        self.line_number: int | None = None
        if match is not None:
            self.encoding = match[1].decode()
            self.text_start = match.end()
            self.state = "string"
            # The whole of ``start`` past the opening quote belongs to the string or after it.
            done, rest = self.feed(start[match.end() :])
            assert not done or not rest

    def feed(self, chunk: bytes) -> tuple[bool, bytes]:
        """Consume ``chunk``; return whether the message ended, and what follows it."""
        if self.state == "string":
            position = 0
            while True:
                quote = chunk.find(b'"', position)
                if quote < 0:
                    self.escaped_bytes += len(chunk)
                    self.backslashes = _trailing_backslashes(chunk, len(chunk), self.backslashes)
                    return False, b""
                run = _trailing_backslashes(chunk, quote, self.backslashes)
                if run % 2 == 0:  # an unescaped quote: the string ends here
                    self.escaped_bytes += quote
                    self.state = "after"
                    chunk = chunk[quote + 1 :]
                    break
                position = quote + 1
        if self.state == "after":
            take = 64 - len(self.after)
            newline = chunk.find(b"\n", 0, take)
            self.after += chunk[: take if newline < 0 else newline]
            found = _LINE_NUMBER.match(self.after)
            if found is not None or len(self.after) >= 64 or newline >= 0:
                number = None if found is None else found[1]
                self.line_number = None if number in (None, b"null") else int(number)
                self.state = "skip"
        if self.state == "skip":
            newline = chunk.find(b"\n")
            if newline >= 0:
                return True, chunk[newline + 1 :]
        return False, b""

    def result(self) -> Long:
        text = self.head[self.text_start :] if self.text_start else b""
        return Long(self.head, self.encoding, text, self.escaped_bytes, self.line_number)


def _trailing_backslashes(data: bytes, end: int, carried: int) -> int:
    """How many backslashes end ``data[:end]``, counting ``carried`` ones before ``data``."""
    count = 0
    while count < end and data[end - 1 - count] == 0x5C:
        count += 1
    return carried + count if count == end else count


def decode(value: dict[str, str], errors: str = "surrogateescape") -> str:
    """A path or line from rg's JSON: ``{"text": ...}`` or ``{"bytes": base64}``.

    Paths keep undecodable bytes as the os module does (``surrogateescape``);
    lines shown to a model replace them.
    """
    if "text" in value:
        return value["text"]
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", errors)


@attrs.define
class Run:
    """How one rg process ended: its exit code and the start of what it said on stderr."""

    returncode: int | None = None
    stderr: str = ""


async def run(
    arguments: Sequence[str],
    *,
    cwd: int,
    cwd_path: str,
    consume: Callable[[list[bytes | Long]], None],
    config: str | None = None,
    separator: bytes = b"\n",
) -> Run:
    """Run rg in the open folder ``cwd``, handing its output messages to ``consume``.

    Reading and ``consume`` run in a worker thread, so a search with many
    matches never holds up the event loop. ``config`` is a ripgrep config file
    of further arguments (used instead of ``--no-config``). The process is
    killed when the call fails or is cancelled.
    """
    # On Linux the child changes into the folder the descriptor holds,
    # whatever its path names by now; elsewhere the path is used.
    linux = sys.platform == "linux"
    directory = f"/proc/self/fd/{cwd}" if linux else cwd_path
    # Without ``config``, --no-config makes rg ignore RIPGREP_CONFIG_PATH;
    # with it, ours replaces the user's.
    environment = dict(os.environ)
    if config is not None:
        environment["RIPGREP_CONFIG_PATH"] = config
    done = Run()
    import tempfile  # imported on the first search, not when the tools are built

    with tempfile.TemporaryFile() as errors:
        # stderr goes to a file: a pipe nobody reads could fill and stall rg.
        command = [binary(), *arguments]

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                cwd=directory,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                pass_fds=(cwd,) if linux else (),
            )

        try:
            process = await anyio.to_thread.run_sync(start)
        except OSError as error:  # the system's limits on a command line, say
            raise pegboard.ToolFailure(
                f"cannot start rg: {error.strerror or error}; shorten the pattern or the path"
            ) from None
        pump = _Pump(process, separator, consume)
        try:
            # On cancellation the thread is left behind, rg is killed below,
            # and the thread then reads the end of the pipe and stops.
            await anyio.to_thread.run_sync(pump.run, abandon_on_cancel=True)
            done.returncode = await anyio.to_thread.run_sync(process.wait)
        finally:
            if process.poll() is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(process.wait)
            # A cancellation can land before the pump's thread starts: then no
            # thread will ever close the pipe, so it is closed here.
            pump.forgo()
        errors.seek(0)
        done.stderr = errors.read(_STDERR).decode("utf-8", "replace").strip()
    return done


class _Pump:
    """Reads rg's output in a worker thread; exactly one side closes the pipe."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        separator: bytes,
        consume: Callable[[list[bytes | Long]], None],
    ) -> None:
        self._process = process
        self._separator = separator
        self._consume = consume
        self._lock = threading.Lock()
        self._state = "waiting"  # then "running" (the thread closes) or "forgone"

    def run(self) -> None:
        with self._lock:
            if self._state == "forgone":
                return
            self._state = "running"
        _pump(self._process, self._separator, self._consume)

    def forgo(self) -> None:
        """Close the pipe unless the thread has taken it (the thread closes it then)."""
        with self._lock:
            if self._state == "waiting":
                self._state = "forgone"
                stdout = self._process.stdout
                if stdout is not None:
                    stdout.close()


def _pump(
    process: subprocess.Popen[bytes],
    separator: bytes,
    consume: Callable[[list[bytes | Long]], None],
) -> None:
    stdout = process.stdout
    assert stdout is not None
    with stdout:
        if sys.platform == "linux":
            # A bigger pipe: fewer, larger reads (F_SETPIPE_SZ; best effort).
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.fcntl(stdout.fileno(), _F_SETPIPE_SZ, _READ)
        lines = Lines(separator=separator)
        descriptor = stdout.fileno()
        buffer = bytearray(_READ)
        view = memoryview(buffer)
        while True:
            if hasattr(os, "readv"):  # into one reused buffer
                chunk = bytes(view[: os.readv(descriptor, [buffer])])
            else:
                chunk = os.read(descriptor, _READ)
            if not chunk:
                break
            batch = lines.feed(chunk)
            if batch:
                consume(batch)
