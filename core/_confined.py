"""Confined plugins, seen from the host: a worker process each, and proxies of its tools."""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._codec import SchemaCodec
from ._confining import (  # also named here, as before
    ConfineMode,
    Confining,
    confinement_missing,
    network_names,
)
from ._durable import dump_outcome, load_outcome
from ._errors import PluginCrashed, ToolFailure
from ._json import thaw
from ._outcome import Completed
from ._pipeline import ExecuteEvent, Refused, Unplain
from ._plugins import PluginError
from ._registry import Registration, Tools
from ._tool import Tool, ToolContext, ToolDefinition, ToolLog, ToolResponse, tool
from ._wire import (
    Channel,
    Message,
    ProtocolError,
    dump_definition,
    load_annotations,
    load_content,
    load_progress,
    read_blocking,
)

__all__ = (
    "ConfineMode",
    "Confining",
    "Worker",
    "confinement_missing",
    "network_names",
    "observing",
)

logger = logging.getLogger("pegboard")

#: The longest line of a worker's standard error passed on to the log.
_LINE = 2000
Record = Callable[[PluginError, "BaseException | None"], None]

#: The messages that answer a call: it is over in the worker.
_ANSWERS = frozenset({"result", "failure", "refused", "defect"})

#: How long ``location.prepare()`` waits for a confined ``prepare_request`` hook: it
#: waits with the event loop held, so an untrusted plugin gets little of it.
PREPARE_SECONDS = 1.0


_OBSERVING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pegboard_observing", default=False
)


@contextlib.contextmanager
def observing() -> Iterator[None]:
    """Workers started inside the block watch their plugin for the conformance kit:
    writes, connections, environment reads, printing, and what outlives teardown."""
    token = _OBSERVING.set(True)
    try:
        yield
    finally:
        _OBSERVING.reset(token)


class Worker:
    """One confined plugin's worker process, and the host's side of the protocol.

    Its tools are registered, through the plugin's own `Tools`, as proxies whose
    codecs are `pegboard.SchemaCodec`s of the plugin's schemas: the host's
    pipeline validates, bounds, retains and runs hooks as for any tool. When the
    worker dies, its calls fail with `pegboard.PluginCrashed`, the death is
    recorded and its registrations close; the Location goes on.
    """

    def __init__(self, name: str, tools: Tools, record: Record, timeout: float) -> None:
        self.name = name
        self._tools = tools
        self._record = record
        self._timeout = timeout
        self._numbers = itertools.count(1)
        self._pending: dict[int, _Replies] = {}
        self._registrations: dict[int, Registration] = {}
        self._process: anyio.abc.Process | None = None
        self._channel: Channel | None = None
        self._answers: int | None = None
        self._answer_buffer = bytearray()
        self._exits = contextlib.ExitStack()
        self._activated: MemoryObjectSendStream[Message] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._closing = False
        self._served = anyio.Event()
        self._why: str | None = None
        #: Why the worker is gone, once it is.
        self.dead: str | None = None
        #: The hooks the plugin implements (known once it activated).
        self.hooks: tuple[str, ...] = ()
        #: Seconds importing the plugin took in the worker (known once it activated).
        self.import_seconds: float | None = None
        self._folder: list[str] = []
        self._network = False
        #: Whether the worker watches the plugin for the conformance kit (`observing`).
        self._observe = _OBSERVING.get()
        #: What the worker saw the plugin do, when it watches: ``kind``, ``what``, ``where``.
        self.observed: list[dict[str, str]] = []
        #: The call IDs of calls whose progress came after they settled, when it watches.
        self.late_progress: list[str] = []
        #: The latest call IDs of calls whose tool returned although cancelled in the
        #: worker (a result that merely crossed a cancellation on the pipe is not one).
        self.discarded: collections.deque[str] = collections.deque(maxlen=64)
        self._call_ids: dict[int, str] = {}
        self._waiting: MemoryObjectReceiveStream[Message] | None = None
        #: How many calls were sent to the worker.
        self.calls_sent = 0
        #: The calls running in the worker, including cancelled ones not yet over there.
        self.running: set[int] = set()

    async def spawn(
        self,
        tasks: anyio.abc.TaskGroup,
        *,
        folder: str | None,
        network: bool,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """Start the worker process, which boots while the host goes on: a Location
        starts all its workers at once and activates their plugins in order.
        ``environment`` is added to its allow-listed one (the secrets the host grants)."""
        from .sandbox import Confinement, installation, isolated

        self._folder = extra = [folder] if folder else []
        self._network = network

        def confine() -> Confinement:
            # The installation's .pth files read, a folder made: off the event loop.
            made = isolated(readable=installation(extra), network=network, environment=environment)
            return self._exits.enter_context(made)

        confinement = await anyio.to_thread.run_sync(confine)
        to_worker = os.pipe()
        from_worker = os.pipe()
        answers = os.pipe()
        inherited = (to_worker[0], from_worker[1], answers[1])
        for descriptor in (to_worker[1], from_worker[0], answers[0]):
            os.set_inheritable(descriptor, False)
        argv = [sys.executable, "-I", "-m", "pegboard._worker", *map(str, inherited)]
        try:
            self._process = await anyio.open_process(
                confinement.command(argv, cwd=Path("/tmp")),
                **confinement.spawn_options(pass_fds=inherited),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        finally:
            for descriptor in inherited:
                os.close(descriptor)
        self._channel = Channel(from_worker[0], to_worker[1])
        self._answers = answers[0]
        self._exits.callback(os.close, answers[0])
        self._exits.callback(os.close, from_worker[0])
        self._exits.callback(os.close, to_worker[1])
        activated, self._waiting = anyio.create_memory_object_stream[Message](1)
        self._activated = activated
        await tasks.start(self._serve)

    async def activate(
        self, *, entry_point: str, options: dict[str, Any], root: Path
    ) -> Message | None:
        """Activate the plugin in the spawned worker; the ``activated`` message, or None
        when the worker died or did not answer within the timeout."""
        waiting = self._waiting
        assert self._channel is not None
        assert waiting is not None
        self._channel.send(
            {
                "type": "activate",
                "plugin": self.name,
                "entry_point": entry_point,
                "path": self._folder,
                "observe": self._observe,
                "network": self._network,
                "options": options,
                "root": str(root),
                "timeout": self._timeout,
            }
        )
        with anyio.move_on_after(self._timeout):
            async with waiting:
                async for message in waiting:
                    self.hooks = tuple(message.get("hooks", ()))
                    self.import_seconds = message.get("import_seconds")
                    return message
                return None  # died first
        self.kill()
        return None

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own the worker's pump, reader and log until it exits or the Location closes."""
        assert self._process is not None
        assert self._channel is not None
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._channel.pump)
                if self._process.stderr is not None:
                    group.start_soon(self._log, self._process.stderr)
                task_status.started()
                try:
                    await self._read()
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._ended()
                    group.cancel_scope.cancel()
        finally:
            self._served.set()

    async def _read(self) -> None:
        assert self._channel is not None
        try:
            await self._channel.deliver(self._dispatch)
        except ProtocolError as error:
            self.kill()
            self._why = f"it broke the protocol ({error}) and was stopped"

    def _dispatch(self, message: Message) -> bool:
        """Act on one message from the worker (on asyncio, in the event loop's callback)."""
        kind = message["type"]
        if kind == "registered":
            self._register(message)
        elif kind == "closed":
            registration = self._registrations.pop(message["key"], None)
            if registration is not None:
                registration.close()
        elif kind == "activated":
            if self._activated is not None:
                self._activated.send_nowait(message)
                self._activated.close()
                self._activated = None
        elif kind == "error":
            self._record_error(message)
        elif kind == "observed":
            self.observed.extend(message["events"])
        elif kind == "ended":  # a call the host cancelled is over in the worker
            self.running.discard(message["id"])
            if message["discarded"]:
                self.discarded.append(str(message["call_id"]))
                logger.warning(
                    "discarded the result of tool %r (call %s): the call was cancelled "
                    "while it ran",
                    message["name"],
                    message["call_id"],
                )
        else:
            if kind in _ANSWERS:
                self.running.discard(message["id"])
            replies = self._pending.get(message.get("id", 0))
            if replies is not None:
                replies.send_nowait(message)
            elif kind == "progress":  # its call is over here: no runner will take it
                if message["id"] in self._call_ids and message["id"] not in self.running:
                    self.late_progress.append(self._call_ids[message["id"]])
                if self._channel is not None:
                    self._channel.send({"type": "taken", "id": message["id"]})
        return True

    async def _ended(self) -> None:
        """The worker is gone (or going): say why, fail its calls, close its tools."""
        process = self._process
        status = None
        if process is not None:
            # Shielded: a worker is reaped even when the Location closing cancels this.
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(2.0):
                    status = await process.wait()
                if status is None:
                    self.kill()
                    status = await process.wait()
        why = self._why or _describe_exit(status)
        self.dead = why
        self.running.clear()
        if self._activated is not None:
            self._activated.close()
        for replies in self._pending.values():
            replies.send_nowait({"type": "died", "message": why})
        for registration in self._registrations.values():
            registration.close()
        self._registrations.clear()
        if not self._closing:
            self._record(PluginError(self.name, "worker", f"its worker process {why}"), None)

    async def _log(self, stream: anyio.abc.ByteReceiveStream) -> None:
        buffer = b""
        async for data in stream:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                text = line[:_LINE].decode("utf-8", "replace")
                logger.info("confined plugin %r: %s", self.name, text)
            buffer = buffer[-_LINE:]

    def _record_error(self, message: Message) -> None:
        phase = message.get("phase", "background")
        error = PluginError(self.name, phase, str(message.get("message", "")))
        self._record(error, None)

    def _register(self, message: Message) -> None:
        proxies: dict[str, Tool] = {}
        key = message["key"]
        for data in message["tools"]:
            output = data["output_schema"]
            proxies[data["name"]] = tool(
                description=data["description"],
                execute=_Proxy(self, key, data["name"]),
                input=SchemaCodec(data["input_schema"]),
                output=None if output is None else SchemaCodec(output),
                title=data.get("title"),
                annotations=load_annotations(data.get("annotations")),
                extra=data.get("extra"),
            )
        try:
            self._registrations[key] = self._tools.register(
                proxies, namespace=message.get("namespace")
            )
        except ValueError as error:  # its scope closed meanwhile, or names the host refuses
            logger.warning("confined plugin %r: a registration was refused: %s", self.name, error)

    async def call(self, key: int, authored: str, value: Any, context: ToolContext) -> Any:
        """Run tool ``authored`` of registration ``key`` in the worker; its `ToolResponse`."""
        if self.dead is not None or self._channel is None:
            raise PluginCrashed(self.name, authored, None, f"its worker process {self.dead}")
        number = next(self._numbers)
        self._pending[number] = replies = _Replies()
        identity = {
            "session_id": context.session_id,
            "agent": context.agent,
            "message_id": context.message_id,
            "call_id": context.call_id,
            "attempt": context.attempt,
        }
        try:
            self._channel.send(
                {
                    "type": "call",
                    "id": number,
                    "key": key,
                    "name": authored,
                    "input": thaw(value),
                    "context": identity,
                }
            )
            self.calls_sent += 1
            self.running.add(number)
            if self._observe:
                self._call_ids[number] = context.call_id
            while True:  # the worker dying sends a "died" message
                message = await replies.receive()
                if message["type"] == "log":
                    await self._relay_log(context, message)
                    continue
                if message["type"] != "progress":
                    # Cancelled as the answer came: the tool had finished, the call is
                    # cancelled all the same, and nothing was swallowed.
                    await anyio.lowlevel.checkpoint_if_cancelled()
                    return self._answer(authored, message)
                await context.progress(load_progress(message["progress"]))
                self._channel.send({"type": "taken", "id": number})
        except anyio.get_cancelled_exc_class():
            if self._channel is not None:
                self._channel.send({"type": "cancel", "id": number})
            raise
        finally:
            del self._pending[number]

    async def _relay_log(self, context: ToolContext, message: Message) -> None:
        """A log message the call's tool sent, to the runner; a malformed one is dropped."""
        level: Any = message.get("level")  # checked by ToolLog, as all that comes across
        text: Any = message.get("message")
        try:
            record = ToolLog(level, text, message.get("data"))
        except (TypeError, ValueError) as error:
            logger.warning("dropped a log message from plugin %r: %s", self.name, error)
            return
        await context.log(record.level, record.message, record.data)

    def _answer(self, authored: str, message: Message) -> ToolResponse[Any]:
        kind = message["type"]
        problem = message.get("metadata_problem")
        # Metadata that could not cross is dropped by the pipeline, with the reason.
        metadata: Any = message.get("metadata") if problem is None else Unplain(str(problem))
        if kind == "result":
            return ToolResponse(
                output=message["output"],
                content=load_content(message["content"]),
                metadata=metadata,
                provider_state=message.get("provider_state"),
            )
        if kind == "failure":
            raise ToolFailure(message["message"], metadata=metadata)
        if kind == "refused":
            raise Refused(message["kind"], message["why"])
        if kind == "defect":
            raise PluginCrashed(self.name, authored, message["error_type"], message["message"])
        raise PluginCrashed(self.name, authored, None, f"its worker process {message['message']}")

    async def after(self, event: ExecuteEvent) -> object:
        """The plugin's ``execute_after`` hook, run in the worker on the durable outcome."""
        if self.dead is not None or self._channel is None:
            return None  # a dead plugin's hook no longer takes part
        number = next(self._numbers)
        self._pending[number] = replies = _Replies()
        try:
            self._channel.send(
                {
                    "type": "execute_after",
                    "id": number,
                    "name": event.name,
                    "outcome": dump_outcome(event.outcome),
                    # The durable form leaves the ephemeral output out; hooks see it.
                    "output": thaw(event.outcome.output)
                    if isinstance(event.outcome, Completed)
                    else None,
                    "managed": [str(path) for path in event.managed],
                }
            )
            message = await replies.receive()
            if message["type"] == "replaced":
                stored = message["outcome"]
                if stored is None:
                    return None
                replacement = load_outcome(stored)
                if isinstance(replacement, Completed):
                    replacement = attrs.evolve(replacement, output=message.get("output"))
                return replacement
            if message["type"] == "defect":
                raise PluginCrashed(
                    self.name, "execute_after", message["error_type"], message["message"]
                )
            return None  # died meanwhile: recorded; the call goes on without it
        finally:
            del self._pending[number]

    async def ping(self) -> bool:
        """Wait for the worker's event loop to answer; False when the worker is gone.

        The answer is late by as long as the plugin holds that loop."""
        if self.dead is not None or self._channel is None:
            return False
        number = next(self._numbers)
        self._pending[number] = replies = _Replies()
        try:
            self._channel.send({"type": "ping", "id": number})
            answer = await replies.receive()
            return bool(answer["type"] == "pong")
        finally:
            del self._pending[number]

    def prepare(self, definitions: list[ToolDefinition], final_step: bool) -> None:
        """The plugin's ``prepare_request`` hook, run in the worker: shortens ``definitions``.

        ``location.prepare()`` is synchronous, so this waits for the answer
        without the event loop: at most `PREPARE_SECONDS`, or an untrusted
        plugin could stall the host. A worker that does not answer by then is
        stopped (its tools leave the next request) and the hook's failure recorded.
        """
        if self.dead is not None or self._channel is None or self._answers is None:
            return
        number = next(self._numbers)
        deadline = time.monotonic() + min(self._timeout, PREPARE_SECONDS)
        try:
            self._channel.send(
                {
                    "type": "prepare_request",
                    "id": number,
                    "definitions": [dump_definition(definition) for definition in definitions],
                    "final_step": final_step,
                }
            )
            self._channel.flush_blocking(deadline)
            while True:
                answer = read_blocking(self._answers, self._answer_buffer, deadline)
                if answer.get("id") == number:
                    break  # earlier answers came too late for their request
        except (TimeoutError, EOFError) as error:
            self.kill()
            raise RuntimeError(
                f"its prepare_request hook did not answer within {PREPARE_SECONDS:g} s "
                f"({error}); its worker was stopped"
            ) from None
        if "error" in answer:
            raise RuntimeError(answer["error"])
        offered = list(definitions)
        definitions[:] = [offered[index] for index in answer["kept"]]

    def kill(self) -> None:
        """Stop the worker at once; bubblewrap takes everything it started along."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    async def close(self) -> None:
        """Tear the plugin down in its worker and end it; kill it past the timeout."""
        self._closing = True
        try:
            if self._channel is not None and self.dead is None:
                self._channel.send({"type": "close"})
                with anyio.move_on_after(self._timeout):
                    assert self._process is not None
                    await self._process.wait()
        finally:
            self.kill()
            with anyio.CancelScope(shield=True):
                if self._process is not None:
                    await self._process.wait()
                if self._channel is not None:
                    self._channel.close()
                if self._group is not None:
                    with anyio.move_on_after(1.0):  # what the worker said last is read
                        await self._served.wait()
                    self._group.cancel_scope.cancel()
                    await self._served.wait()  # nothing reads a pipe as it closes
                if self._process is not None:
                    await self._process.aclose()
                # Its private /tmp goes, with whatever the plugin left there: off the loop.
                await anyio.to_thread.run_sync(self._exits.close)


class _Replies:
    """The worker's messages about one exchange (a call, a hook, a ping), in order."""

    __slots__ = ("_arrived", "_messages")

    def __init__(self) -> None:
        self._messages: collections.deque[Message] = collections.deque()
        self._arrived: anyio.Event | None = None

    def send_nowait(self, message: Message) -> None:
        self._messages.append(message)
        if self._arrived is not None:
            self._arrived.set()

    async def receive(self) -> Message:
        while not self._messages:
            self._arrived = anyio.Event()
            await self._arrived.wait()
        return self._messages.popleft()


@attrs.frozen
class _Proxy:
    """A proxy tool's execute: the call crosses to the worker."""

    worker: Worker
    key: int
    name: str

    async def __call__(self, value: Any, context: ToolContext) -> Any:
        return await self.worker.call(self.key, self.name, value, context)


def _describe_exit(status: int | None) -> str:
    if status is None:
        return "ended"
    if status < 0:
        try:
            return f"died of signal {signal.Signals(-status).name}"
        except ValueError:
            return f"died of signal {-status}"
    # bubblewrap reports a signal that killed the worker as 128 + its number.
    if status > 128:
        try:
            return f"died of signal {signal.Signals(status - 128).name}"
        except ValueError:
            pass
    return f"exited with status {status}"
