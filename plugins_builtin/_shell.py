"""The bash tool: one shell command in its own process group, output bounded and spooled."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread
import attrs

import pegboard

from ._capture import Capture
from ._paths import escape, failure, resolve

if TYPE_CHECKING:
    from ._commands import Analysis

__all__ = ("BashInput", "Limits", "Shell")

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
# Read up to this much per wakeup; the pipe is widened to match (Linux).
_READ_BYTES = 1 << 20
# After the shell exits, background children may hold its output open.
_DRAIN_SECONDS = 0.25
# How often the reading thread looks for cancellation.
_POLL_MILLISECONDS = 100
# Linux: the command runs under a child subreaper that stops everything it
# started, even what left its process group. Elsewhere: the process group only.
_REAPER = Path(__file__).with_name("_reaper.py")
_SUBREAPER = sys.platform.startswith("linux") and Path("/proc/self/stat").exists()
# How long the subreaper may take to stop everything beyond its own grace.
_REAPER_MARGIN = 1.0


@attrs.frozen(kw_only=True)
class Limits:
    """How the bash tool bounds memory, disk and time."""

    #: Output kept in memory: the first and the last this many bytes.
    head_bytes: int = 1 << 20
    tail_bytes: int = 1 << 20
    #: The most one command's spool file may hold.
    spool_bytes: int = 1 << 30
    #: How long a process group has between SIGTERM and SIGKILL.
    grace_seconds: float = 2.0
    #: How often progress (with the tail of the output) is reported.
    progress_seconds: float = 0.5
    #: How much of the output's tail a progress report carries.
    progress_bytes: int = 4096
    #: How many commands of one Location run at once; the others wait their turn.
    running: int = attrs.field(factory=lambda: _running_default())


def _running_default() -> int:
    """A share of the process's file descriptors: each command holds about eight."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 64 if soft == resource.RLIM_INFINITY else max(4, min(256, soft // 32))


@attrs.frozen
class BashInput:
    command: str = attrs.field(metadata={"description": "The shell command to run."})
    timeout: float | None = attrs.field(
        default=None,
        metadata={
            "description": f"Seconds before the command is killed (default "
            f"{DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g})."
        },
    )
    workdir: str | None = attrs.field(
        default=None,
        metadata={
            "description": "The folder to run in, relative to the Location root "
            "(default: the root)."
        },
    )
    network: bool = attrs.field(
        default=False,
        metadata={
            "description": "Whether the command needs the network (default false: it has "
            "none). Asks permission for the action `network`."
        },
    )


BASH = f"""Run a shell command in the Location and return its output (stdout and stderr together).

The command runs with the Location root (or `workdir`) as its working directory, stdin
closed. Where the host sandboxes commands it can write only inside the Location and its
own temporary folder ($TMPDIR, /tmp), and has no network unless `network` is true. After
`timeout` seconds (default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}) everything it started
is stopped; background processes it leaves behind are stopped when it finishes. Long output
keeps its first and last megabyte here; all of it is saved to a file the result names (read
and grep can open it)."""


class Shell:
    """The bash tool of one Location, capturing its trusted services."""

    def __init__(
        self,
        filesystem: pegboard.Filesystem,
        permissions: pegboard.Permissions,
        spool_dir: Path | pegboard.ManagedStorage,
        *,
        sandbox: pegboard.Sandbox,
        limits: Limits | None = None,
    ) -> None:
        self._filesystem = filesystem
        self._permissions = permissions
        self._sandbox = sandbox
        self._spool_dir = spool_dir
        self._limits = limits or Limits()
        self.program = shutil.which("bash") or "/bin/sh"
        #: Commands beyond `Limits.running` wait here for one to end.
        self._slots = anyio.Semaphore(self._limits.running)
        #: The process groups of the commands running now, with their confinement.
        self._running: dict[int, pegboard.Confinement] = {}

    async def close(self) -> None:
        """Stop every command still running, as its timeout would: for the Location's close."""
        groups = list(self._running)
        for group, confinement in list(self._running.items()):
            _ask_to_stop(group, confinement.leader(group))
        margin = _REAPER_MARGIN if _SUBREAPER else 0.0
        with anyio.move_on_after(self._limits.grace_seconds + margin):
            # Nothing signals a process group's end; it is polled, briefly.
            while any(_signal_group(group, 0) for group in groups):  # noqa: ASYNC110
                await anyio.sleep(0.02)
        for group in groups:
            _signal_group(group, signal.SIGKILL)

    def tools(self) -> dict[str, pegboard.Tool]:
        """The tools by authored name."""
        hints = pegboard.ToolAnnotations(
            read_only=False, destructive=True, idempotent=False, open_world=True
        )
        bash = pegboard.tool(
            description=BASH,
            execute=self.bash,
            input=BashInput,
            title="Run a shell command",
            annotations=hints,
        )
        return {"bash": bash}

    async def bash(
        self, input: BashInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        # Reading shell lines is the bash tool's own work: imported at its first call,
        # not by every Location that lists it.
        from ._commands import analyse, visible
        from ._confine import Masks, masks

        command = input.command
        if not command.strip():
            raise pegboard.ToolFailure("the command is empty; give a shell command to run")
        if "\0" in command:
            raise pegboard.ToolFailure(
                "the command holds a NUL character, which no command line can carry; "
                "remove it (printf '\\0' writes one)"
            )
        timeout = DEFAULT_TIMEOUT if input.timeout is None else input.timeout
        if not 0 < timeout <= MAX_TIMEOUT:
            raise pegboard.ToolFailure(
                f"timeout is in seconds, more than 0 and at most {MAX_TIMEOUT:g}; got {timeout:g}"
            )
        workdir = self._workdir(input.workdir)
        shown = self._filesystem.relative(workdir)
        self._sandbox.require()
        await self._ask(command, analyse(command), workdir, shown, timeout)
        if input.network:
            await self._permissions.ask(
                pegboard.PermissionRequest(
                    action="network",
                    resources=[visible(command, newlines=False)],
                    always=[],
                    metadata={"command": visible(command), "workdir": shown},
                )
            )
        # The masks matter only where something enforces them.
        found = (
            await anyio.to_thread.run_sync(masks, self._filesystem, self._permissions)
            if self._sandbox.confines
            else Masks()
        )
        capture = Capture(
            self._spool_dir,
            head_bytes=self._limits.head_bytes,
            tail_bytes=self._limits.tail_bytes,
            spool_bytes=self._limits.spool_bytes,
        )
        async with self._slots:
            started = anyio.current_time()
            try:
                async with self._sandbox.call(
                    network=input.network, hidden=found.hidden, read_only=found.read_only
                ) as confinement:
                    returncode, timed_out = await self._run(
                        command, workdir, timeout, capture, context, confinement
                    )
            except OSError as error:
                if error.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                raise pegboard.ToolFailure(
                    "the command could not start: the host has too many files open "
                    f"({error.strerror}); run fewer commands at once, or try again"
                ) from None
        return _response(
            capture,
            returncode,
            timed_out=timed_out,
            timeout=timeout,
            seconds=anyio.current_time() - started,
            workdir=shown,
        )

    async def _ask(
        self, command: str, analysis: Analysis, workdir: Path, shown: str, seconds: float
    ) -> None:
        """Ask for every command the line runs, then for ``edit`` on every file it writes."""
        from ._arity import approval_pattern
        from ._commands import visible

        metadata: dict[str, Any] = {
            "command": visible(command),
            "workdir": shown,
            "timeout": seconds,
        }
        if analysis.unreadable is not None:
            whole = visible(command, newlines=False)
            metadata["unreadable"] = analysis.unreadable
            await self._permissions.ask(
                pegboard.PermissionRequest(
                    action="bash", resources=[whole], opaque=[whole], metadata=metadata
                )
            )
            return
        commands = analysis.commands
        resources = list(dict.fromkeys(item.text for item in commands))
        if not resources:  # assignments or comments only: nothing runs
            resources = [visible(command, newlines=False)]
        opaque = [item.text for item in commands if item.opaque is not None]
        patterns = [approval_pattern(item) for item in commands]
        metadata["opaque"] = {item.text: item.opaque for item in commands if item.opaque}
        missing = self._sandbox.missing
        if missing is not None:
            # Nothing would hold the command to the rules: every part is asked, whatever
            # the rules or saved approvals allow (deny rules still refuse).
            metadata["sandbox"] = missing
            opaque = resources
        await self._permissions.ask(
            pegboard.PermissionRequest(
                action="bash",
                resources=resources,
                opaque=opaque,
                embedding=[item.text for item in commands if item.embeds],
                always=list(dict.fromkeys(p for p in patterns if p is not None)),
                metadata=metadata,
            )
        )
        paths = self._written(analysis, workdir)
        if paths:
            await self._permissions.ask(
                pegboard.PermissionRequest(
                    action="edit",
                    resources=list(paths),
                    opaque=[path for path, unknown in paths.items() if unknown],
                    always=[escape(path) for path, unknown in paths.items() if not unknown],
                    metadata={"command": metadata["command"], "workdir": shown, "redirected": True},
                )
            )

    def _written(self, analysis: Analysis, workdir: Path) -> dict[str, bool]:
        """The files the line writes as path rules see them, each with whether it is unknown."""
        from ._commands import visible

        # A `cd` anywhere may move a relative path: where it writes is known only then.
        moves = any(item.words[0] in ("cd", "pushd", "popd") for item in analysis.commands)
        paths: dict[str, bool] = {}
        for write in analysis.writes:
            path = os.path.expanduser(write.path)
            if write.dynamic or (moves and not os.path.isabs(path)):
                paths[visible(write.path, newlines=False)] = True
            else:
                real = Path(os.path.realpath(workdir / path))  # a link is judged by its target
                paths.setdefault(visible(self._filesystem.relative(real), newlines=False), False)
        return paths

    def _workdir(self, workdir: str | None) -> Path:
        real = resolve(self._filesystem, "." if workdir is None else workdir)
        try:
            return self._filesystem.directory(real)
        except OSError as error:
            raise failure(error, workdir or ".", self._filesystem) from None

    async def _run(
        self,
        command: str,
        workdir: Path,
        timeout: float,  # noqa: ASYNC109 - a timeout here is a result to report, not an error
        capture: Capture,
        context: pegboard.ToolContext,
        confinement: pegboard.Confinement,
    ) -> tuple[int, bool]:
        """Run ``command`` to its end, its timeout or cancellation; return (code, timed out).

        Whatever happens, every process it started is gone and the spool closed
        when this returns or raises; cancellation propagates.
        """
        reader, writer = os.pipe()
        try:
            # The subreaper writes the command's wait status here: inside a PID
            # namespace it cannot die of the command's signal, so bwrap cannot tell.
            status_reader, status_writer = os.pipe()
        except OSError:  # out of descriptors: the first pair goes back
            os.close(reader)
            os.close(writer)
            raise
        try:
            _widen(writer)
            os.set_blocking(reader, False)
            try:
                process = await anyio.open_process(
                    self._argv(command, workdir, confinement, status_writer),
                    cwd=workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=writer,
                    stderr=writer,
                    env=confinement.environment,
                    pass_fds=(status_writer, *confinement.pass_fds),
                    start_new_session=True,  # a process group to kill as one
                )
            except OSError as error:
                hint = (
                    "; write a long script to a file (the write tool) and run that file"
                    if error.errno == errno.E2BIG
                    else ""
                )
                raise pegboard.ToolFailure(
                    f"cannot start {self.program}: {error.strerror or error}{hint}"
                ) from None
            finally:
                os.close(writer)  # the output ends when the group's last writer does
                os.close(status_writer)
            finished = False
            self._running[process.pid] = confinement
            try:
                with anyio.move_on_after(timeout) as deadline:
                    await self._pump(reader, process, capture, context)
                finished = True
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        leader = confinement.leader(process.pid)
                        await _stop(process, leader, self._limits.grace_seconds)
                    finally:
                        del self._running[process.pid]
                        if finished:
                            await anyio.to_thread.run_sync(capture.close)
                        else:
                            capture.discard()  # cancelled: no result will name the spool
            returncode = await process.wait()
            return _status(status_reader, returncode), deadline.cancelled_caught
        finally:
            os.close(reader)
            os.close(status_reader)

    def _argv(
        self,
        command: str,
        workdir: Path,
        confinement: pegboard.Confinement,
        status: int,
    ) -> list[str]:
        shell = [self.program, "-c", command]
        if not _SUBREAPER:
            return confinement.command(shell, cwd=workdir)
        grace = f"{self._limits.grace_seconds:g}"
        reaper = [sys.executable, "-I", "-S", str(_REAPER), grace, f"{_DRAIN_SECONDS:g}"]
        reaper.append(str(status))
        if confinement.isolates_processes:
            # The subreaper is the first process of the sandbox's PID namespace: the
            # command can neither signal it nor leave it, and when it ends, all goes.
            return confinement.command([*reaper, *shell], cwd=workdir, init=True)
        return [*reaper, *confinement.command(shell, cwd=workdir)]

    async def _pump(
        self,
        reader: int,
        process: anyio.abc.Process,
        capture: Capture,
        context: pegboard.ToolContext,
    ) -> None:
        """Capture the output until it ends (or soon after the shell exits), reporting progress."""
        pipe = _Pipe(reader, capture)
        async with anyio.create_task_group() as group:
            group.start_soon(self._report, capture, context)
            group.start_soon(_end_after_exit, process, pipe)
            # Reading and spooling in one worker thread keeps pace with `cat`;
            # a limiter of its own, so long commands never starve other threads.
            await anyio.to_thread.run_sync(pipe.drain, limiter=anyio.CapacityLimiter(1))
            await process.wait()
            group.cancel_scope.cancel()

    async def _report(self, capture: Capture, context: pegboard.ToolContext) -> None:
        """Report progress a few times a second while output grows."""
        reported = 0
        while True:
            await anyio.sleep(self._limits.progress_seconds)
            if capture.total == reported:
                continue
            reported = capture.total
            recent = capture.recent(self._limits.progress_bytes).decode("utf-8", "replace")
            await context.progress(
                pegboard.Progress(message=f"{reported:,} bytes of output so far", content=recent)
            )


class _Pipe:
    """The read end of the output pipe, drained into a capture by a worker thread."""

    def __init__(self, descriptor: int, capture: Capture) -> None:
        self._descriptor = descriptor
        self._capture = capture
        #: When to stop waiting for the end of the output (monotonic seconds).
        self.stop_at: float | None = None

    def drain(self) -> None:
        """Read until the output ends or `stop_at` passes; cancellable at every chunk."""
        poller = select.poll()
        poller.register(self._descriptor, select.POLLIN)
        while self.stop_at is None or time.monotonic() < self.stop_at:
            anyio.from_thread.check_cancelled()
            try:
                chunk = os.read(self._descriptor, _READ_BYTES)
            except BlockingIOError:  # nothing yet: wait a little, then look again
                poller.poll(_POLL_MILLISECONDS)
                continue
            if not chunk:
                return
            self._capture.feed(chunk)


async def _end_after_exit(process: anyio.abc.Process, pipe: _Pipe) -> None:
    await process.wait()
    pipe.stop_at = time.monotonic() + _DRAIN_SECONDS


def _widen(descriptor: int) -> None:
    # A 1 MiB pipe lets a fast writer fill it while we read: ~2x the
    # throughput of the default 64 KiB. Best effort, Linux only.
    setting = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setting is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(descriptor, setting, _READ_BYTES)


def _signal_group(group: int, number: int) -> bool:
    """Send ``number`` to process group ``group``; False if no process is left in it."""
    try:
        os.killpg(group, number)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal (a setuid program) is left
        return True
    return True


def _ask_to_stop(group: int, leader: int) -> bool:
    """SIGTERM to what stops the command gracefully; False if it is gone already.

    That is the process group, or in a sandbox the subreaper inside it
    (signalling bwrap itself would kill everything at once).
    """
    if leader == group:
        return _signal_group(group, signal.SIGTERM)
    try:
        os.kill(leader, signal.SIGTERM)
    except ProcessLookupError:
        return _signal_group(group, signal.SIGTERM)
    return True


async def _stop(process: anyio.abc.Process, leader: int, grace: float) -> None:
    """End the command: SIGTERM, then SIGKILL after ``grace`` seconds; reap the shell.

    Under the subreaper, which stops everything below it itself, the group's
    SIGKILL is a fallback only.
    """
    group = process.pid  # start_new_session made the first process the group's leader
    if _ask_to_stop(group, leader):
        with anyio.move_on_after(grace + _REAPER_MARGIN if _SUBREAPER else grace):
            await process.wait()
            # Nothing signals a process group's end; it is polled, briefly.
            while _signal_group(group, 0):  # noqa: ASYNC110
                await anyio.sleep(0.02)
        _signal_group(group, signal.SIGKILL)
    await process.wait()
    await process.aclose()


def _status(reader: int, returncode: int) -> int:
    """The command's own return code: as its subreaper wrote it, else the process's.

    Never waits: without a subreaper (other platforms) what the command left
    running may still hold the pipe open, with nothing written.
    """
    os.set_blocking(reader, False)
    try:
        written = os.read(reader, 64).decode("ascii", "replace").strip()
    except OSError:  # BlockingIOError among them: nothing was written
        return returncode
    try:
        return int(written)
    except ValueError:
        return returncode


def _response(
    capture: Capture,
    returncode: int,
    *,
    timed_out: bool,
    timeout: float,
    seconds: float,
    workdir: str,
) -> pegboard.ToolResponse[None]:
    head, tail = capture.head, capture.tail
    shown = len(head) + len(tail)
    if capture.total > shown:
        omitted = capture.total - shown
        text = (
            f"{head.decode('utf-8', 'replace')}\n[… {omitted:,} bytes of output omitted here …]\n"
            f"{tail.decode('utf-8', 'replace')}"
        )
    else:
        text = (head + tail).decode("utf-8", "replace") or "(no output)"
    notes = [_ending(returncode, timed_out=timed_out, timeout=timeout)]
    if capture.total > shown:
        notes.append(_accounting(capture, len(head), len(tail)))
    metadata: dict[str, Any] = {
        "exit_code": returncode if returncode >= 0 else None,
        "signal": _signal_name(-returncode) if returncode < 0 else None,
        "timed_out": timed_out,
        "output_bytes": capture.total,
        "kept_bytes": shown,
        "spooled_bytes": capture.spooled,
        "lost_bytes": capture.lost,
        "spool": None if capture.spool is None else str(capture.spool),
        "seconds": round(seconds, 3),
        "workdir": workdir,
    }
    content = text.removesuffix("\n") + "\n\n" + "\n".join(f"({note})" for note in notes)
    return pegboard.ToolResponse(content=content, metadata=metadata)


def _ending(returncode: int, *, timed_out: bool, timeout: float) -> str:
    if timed_out:
        how = f"killed by {_signal_name(-returncode)}" if returncode < 0 else f"exit {returncode}"
        return f"timed out after {timeout:g} s: the process group was stopped ({how})"
    if returncode < 0:
        return f"killed by {_signal_name(-returncode)}"
    return f"exit code {returncode}"


def _accounting(capture: Capture, head: int, tail: int) -> str:
    total = capture.total
    kept = f"output: {total:,} bytes; shown here: the first {head:,} and the last {tail:,}"
    if capture.spool is not None and capture.spooled == total:
        return f"{kept}; all {total:,} bytes are saved in {capture.spool}"
    spool = ""
    if capture.spool is not None:
        spool = f"; {capture.spool} holds the first {capture.spooled:,} bytes"
    why = f" ({capture.spool_error})" if capture.spool_error else ""
    return f"{kept}{spool}; {capture.lost:,} bytes were lost{why}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
