"""A confined plugin's worker: imports, activates and runs one plugin for its host.

Run by the host inside the sandbox as ``python -I -m pegboard._worker IN OUT
ANSWERS``, the three pipe descriptors of the protocol (`pegboard._wire`). What
the plugin prints goes to standard error, never into the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import attrs

from ._activation import Activation
from ._config import PluginSpec
from ._durable import dump_outcome, load_outcome
from ._errors import ToolFailure
from ._json import thaw
from ._observe import Observer, activity
from ._outcome import Completed, Failed
from ._pipeline import ExecuteEvent, encode_response, metadata_problem, run_execute, why
from ._plugins import PluginError, Plugins
from ._registry import Board, Registration, Scope, Tools
from ._services import LocationInfo
from ._tool import Progress, Tool, ToolContext, ToolLog, ToolResponse
from ._wire import (
    Channel,
    Message,
    dump_content,
    dump_progress,
    dump_tool,
    frame,
    load_definition,
)

__all__ = ("main",)


class _Published:
    """The plugin's registrations, and which of them the host has heard of."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: dict[int, tuple[Registration, dict[str, Tool], str | None]] = {}
        self.announced: set[int] = set()
        self.withdrawn: set[int] = set()

    def add(self, registration: Registration, tools: dict[str, Tool], namespace: str | None) -> int:
        with self._lock:
            key = len(self.entries)
            self.entries[key] = (registration, tools, namespace)
            return key

    def changes(self) -> list[Message]:
        """The ``registered`` and ``closed`` messages the host has not had yet."""
        messages: list[Message] = []
        with self._lock:
            for key, (registration, tools, namespace) in self.entries.items():
                if key not in self.announced:
                    self.announced.add(key)
                    messages.append(
                        {
                            "type": "registered",
                            "key": key,
                            "namespace": namespace,
                            "tools": [dump_tool(name, tool) for name, tool in tools.items()],
                        }
                    )
                if registration.closed and key not in self.withdrawn:
                    self.withdrawn.add(key)
                    messages.append({"type": "closed", "key": key})
        return messages

    def tool(self, key: int, name: str) -> Tool:
        # A closed registration still executes what a request captured (law 7).
        return self.entries[key][1][name]


class _RecordingTools(Tools):
    """The plugin's `Tools`: each registration is also announced to the host."""

    __slots__ = ("_published", "_wake")

    def __init__(self, board: Board, scope: Scope, published: _Published, wake: Any) -> None:
        super().__init__(board, scope)
        self._published = published
        self._wake = wake

    def register(self, tools: Mapping[str, Tool], *, namespace: str | None = None) -> Registration:
        snapshot = dict(tools)
        registration = super().register(snapshot, namespace=namespace)
        self._published.add(registration, snapshot, namespace)
        self._wake()
        return registration


class _Worker:
    def __init__(self, channel: Channel, answers: int) -> None:
        self.channel = channel
        self.answers = answers
        self.published = _Published()
        self.board = Board()
        self.calls: dict[int, anyio.CancelScope] = {}
        #: Calls whose tool has returned or raised (not been cancelled), while running.
        self.finished: set[int] = set()
        #: Calls whose cancellation arrived after their tool had finished: it crossed the
        #: answer on the pipe, and the tool swallowed nothing.
        self.crossed: set[int] = set()
        #: Calls whose tool returned or raised after their cancellation reached it:
        #: the tool swallowed it (one that finished first, as the cancellation was
        #: on its way, did not).
        self.swallowed: set[int] = set()
        #: Per call, its progress reports the host has not yet taken, oldest first.
        self.reports: dict[int, list[anyio.Event]] = {}
        self.loop_thread = threading.get_ident()
        self.changed, self._changes = anyio.create_memory_object_stream[None](math.inf)
        self.activation: Activation | None = None
        self.plugin = ""
        self.observer: Observer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def wake(self) -> None:
        if threading.get_ident() == self.loop_thread:
            self.changed.send_nowait(None)
        else:  # a sync hook, in a worker thread of this loop
            anyio.from_thread.run_sync(self.changed.send_nowait, None)

    def announce(self) -> None:
        for message in self.published.changes():
            self.channel.send(message)

    async def follow_changes(self) -> None:
        async with self._changes:
            async for _ in self._changes:
                self.announce()

    def report(self, error: PluginError) -> None:
        self.channel.send(
            {
                "type": "error",
                "plugin": error.plugin,
                "phase": error.phase,
                "message": error.message,
            }
        )

    async def serve(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self.channel.pump)
            group.start_soon(self.follow_changes)
            self.board.subscribe(self.wake)  # a registration closed: tell the host
            try:
                first = await self.channel.receive()
                if first is None or first.get("type") != "activate":
                    return
                await self.activate(first, group)
                await self.channel.deliver(functools.partial(self.handle, group))
            finally:
                with anyio.CancelScope(shield=True):
                    if self.activation is not None:
                        with activity("its teardown (teardown_location)"):
                            await self.activation.close()
                    self.announce()
                    if self.observer is not None:
                        for _ in range(3):  # tasks that end with the teardown finish
                            await anyio.lowlevel.checkpoint()
                        self.observer.after_teardown(self._new_tasks())
                        self.report_observed()
                _drain(self.channel)
                self.channel.close()
                self.changed.close()
                group.cancel_scope.cancel()

    def report_observed(self) -> None:
        """Send what the observer saw since last time (a worker started for the kit)."""
        if self.observer is None:
            return
        self.observer.check_cwd()
        events = self.observer.take()
        if events:
            self.channel.send({"type": "observed", "events": events})

    def _new_tasks(self) -> list[str]:
        """The tasks the plugin started that are still running."""
        return [
            f"{task.get_name()} ({getattr(task.get_coro(), '__qualname__', '?')})"
            for task in _tasks() - self._tasks
            if not task.done()
            and task is not asyncio.current_task()
            and not task.get_name().startswith("pegboard.")  # ended with the worker
        ]

    def handle(self, group: anyio.abc.TaskGroup, message: Message) -> bool:
        """Act on one message from the host; False once it says ``close``."""
        kind = message["type"]
        if kind == "call":
            group.start_soon(self.call, message)
        elif kind == "cancel":
            scope = self.calls.get(message["id"])
            if scope is not None:
                if message["id"] in self.finished:
                    self.crossed.add(message["id"])
                scope.cancel()
        elif kind == "execute_after":
            group.start_soon(self.after, message)
        elif kind == "prepare_request":
            self.prepare(message)
        elif kind == "taken":  # the host's runner took a progress report
            waiting = self.reports.get(message["id"])
            if waiting:
                waiting.pop(0).set()
                if not waiting:
                    del self.reports[message["id"]]
        elif kind == "ping":  # answered by the event loop: late when it is held
            self.channel.send({"type": "pong", "id": message["id"]})
        return bool(kind != "close")

    async def activate(self, message: Message, group: anyio.abc.TaskGroup) -> None:
        self.plugin = name = message["plugin"]
        for folder in reversed(message.get("path", [])):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        plugins = Plugins.only(name, message["entry_point"])
        observer = Observer(
            allowed=frozenset(os.environ),
            network=bool(message.get("network")),
            watching=bool(message.get("observe")),
        )
        observer.install()  # in every worker: the kit's must look like a host's
        if observer.watching:
            self.observer = observer
        started = time.perf_counter()
        with contextlib.suppress(PluginError), activity("importing it"):  # activation records it
            plugins.load(name)
        imported = time.perf_counter() - started
        if self.observer is not None:
            self.observer.baseline(_code_folders(message["entry_point"]))
            self._tasks = _tasks()
        self.activation = activation = Activation(
            plugins,
            LocationInfo(Path(message["root"])),
            self.board,
            services={},
            timeout=float(message["timeout"]),
            strict=False,
            tools=functools.partial(_RecordingTools, published=self.published, wake=self.wake),
        )
        with activity("its activation (activate_location)"):
            await activation.activate(
                [PluginSpec(name, message.get("options", {}))], frozenset(), group
            )
        self.announce()
        self.report_observed()
        errors = [
            {"plugin": error.plugin, "phase": error.phase, "message": error.message}
            for error in activation.errors
        ]
        activation.on_record = self.report  # later failures reach the host as they happen
        hooks = [hook for plugin in activation.active for hook in plugin.hooks]
        self.channel.send(
            {
                "type": "activated",
                "ok": bool(activation.active),
                "errors": errors,
                "hooks": hooks,
                "import_seconds": imported,
            }
        )

    async def call(self, message: Message) -> None:
        number = message["id"]
        answer: Message | None = None
        with anyio.CancelScope() as scope:
            self.calls[number] = scope
            try:
                if self.observer is None:
                    answer = await self._execute(message, scope)
                else:
                    with activity(f"a call of tool {message['name']!r}"):
                        answer = await self._execute(message, scope)
            finally:
                del self.calls[number]
                self.finished.discard(number)
        crossed = number in self.crossed
        self.crossed.discard(number)
        swallowed = number in self.swallowed
        self.swallowed.discard(number)
        if self.observer is not None:
            self.report_observed()
        if scope.cancel_called:
            # The host stopped waiting; it hears when the tool is done, and whether it
            # returned although cancelled (said as for a tool in its own process): not
            # when the tool had finished before the cancellation arrived.
            discarded = not crossed and swallowed
            self.channel.send(
                {
                    "type": "ended",
                    "id": number,
                    "discarded": discarded,
                    "name": message["name"],
                    "call_id": message["context"]["call_id"],
                }
            )
            return
        if answer is not None:
            self.announce()  # tools the call registered are known before its result
            self.channel.send({"id": number, **answer})

    async def _run(self, number: int, tool: Tool, value: Any, context: ToolContext) -> Any:
        """The tool's execute; marks the call finished once it returns or raises."""
        try:
            result = await run_execute(tool, value, context)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException:
            self._finish(number)
            raise
        self._finish(number)
        return result

    def _finish(self, number: int) -> None:
        self.finished.add(number)
        task = asyncio.current_task()
        # A cancellation anyio delivered is counted on the task until the scope
        # that asked for it takes it back: a tool that ends with one pending
        # caught it and went on.
        if task is not None and task.cancelling():
            self.swallowed.add(number)

    async def _execute(self, message: Message, scope: anyio.CancelScope) -> Message | None:
        number = message["id"]
        tool = self.published.tool(message["key"], message["name"])
        try:
            value = tool.input.decode(message["input"])
        except ValueError as error:
            return {"type": "refused", "kind": "invalid_input", "why": why(error)}

        async def forward(update: Progress) -> None:
            # As in the host's process, a report returns once the runner has taken it.
            taken = anyio.Event()
            self.reports.setdefault(number, []).append(taken)
            self.channel.send({"type": "progress", "id": number, "progress": dump_progress(update)})
            await taken.wait()

        async def log(record: ToolLog) -> None:
            self.channel.send(
                {
                    "type": "log",
                    "id": number,
                    "level": record.level,
                    "message": record.message,
                    "data": record.data,
                }
            )

        context = ToolContext(**message["context"], progress=forward, log=log)
        try:
            result = await self._run(number, tool, value, context)
        except ToolFailure as failure:
            return {
                "type": "failure",
                "message": str(failure.message),
                **_metadata(failure.metadata),
            }
        except Exception as error:  # noqa: BLE001 - a defect is reported to the host, which raises it
            return {"type": "defect", "error_type": type(error).__name__, "message": str(error)}
        if scope.cancel_called:
            return None
        state = None
        if isinstance(result, ToolResponse):
            returned, content, metadata = result.output, result.content, result.metadata
            state = result.provider_state
        elif tool.output is not None:
            returned, content, metadata = result, None, None
        else:
            returned, content, metadata = None, result, None
        try:
            output, items = encode_response(tool, returned, content)
        except ValueError as error:
            return {"type": "refused", "kind": "invalid_output", "why": why(error)}
        return {
            "type": "result",
            "output": thaw(output),
            "content": dump_content(items),
            **_metadata(metadata),
            "provider_state": None if state is None else thaw(state),
        }

    async def after(self, message: Message) -> None:
        number = message["id"]
        activation = self.activation
        answer: Message
        try:
            outcome = load_outcome(message["outcome"])
            if isinstance(outcome, Completed):
                # The durable form leaves the ephemeral output out; hooks see it.
                outcome = attrs.evolve(outcome, output=message.get("output"))
            assert outcome.call is not None
            assert activation is not None
            event = ExecuteEvent(
                outcome.call, message["name"], outcome, tuple(map(Path, message["managed"]))
            )
            replacement: object = None
            with activity("its execute_after hook"):
                for hook in activation.after_hooks():
                    replacement = await hook.run(event)
            if replacement is not None and not isinstance(replacement, Completed | Failed):
                raise TypeError(
                    f"an execute_after hook returned a {type(replacement).__name__}; "
                    "return a pegboard.Completed, a pegboard.Failed or None"
                )
            answer = {
                "type": "replaced",
                "outcome": None if replacement is None else dump_outcome(replacement),
                "output": thaw(replacement.output) if isinstance(replacement, Completed) else None,
            }
        except Exception as error:  # noqa: BLE001 - reported to the host, which fails the call
            answer = {"type": "defect", "error_type": type(error).__name__, "message": str(error)}
        self.report_observed()
        self.channel.send({"id": number, **answer})

    def prepare(self, message: Message) -> None:
        activation = self.activation
        answer: Message = {"type": "kept", "id": message["id"]}
        try:
            offered = [load_definition(data) for data in message["definitions"]]
            kept = list(offered)
            assert activation is not None
            with activity("its prepare_request hook"):
                for _, hook in activation.prepare_hooks():
                    hook(kept, message["final_step"])
            remaining = {id(definition) for definition in kept}
            answer["kept"] = [
                index for index, definition in enumerate(offered) if id(definition) in remaining
            ]
        except Exception as error:  # noqa: BLE001 - reported to the host, which records it
            answer["error"] = f"{type(error).__name__}: {error}"
        data = frame(answer)
        while data:  # the host is waiting for exactly this
            data = data[os.write(self.answers, data) :]


def _tasks() -> set[asyncio.Task[Any]]:
    try:
        return asyncio.all_tasks()
    except RuntimeError:  # not asyncio
        return set()


def _code_folders(entry_point: str) -> tuple[str, ...]:
    """The plugin's own code: its package's folder, or its module's file."""
    module = sys.modules.get(entry_point.partition(":")[0].strip())
    top = sys.modules.get(module.__name__.partition(".")[0]) if module is not None else None
    file = getattr(top, "__file__", None)
    if file is None:
        return ()
    path = Path(file)
    return (str(path.parent),) if path.name == "__init__.py" else (str(path),)


def _metadata(value: object) -> Message:
    """A tool's metadata as plain JSON, or why it cannot be (the host drops it, and says so)."""
    if value is None:
        return {"metadata": None}
    problem = metadata_problem(value)
    if problem is not None:
        return {"metadata": None, "metadata_problem": problem}
    return {"metadata": thaw(value)}


def _drain(channel: Channel) -> None:
    """Write what is queued before the worker exits (the host may have stopped reading)."""
    with contextlib.suppress(TimeoutError):
        channel.flush_blocking(time.monotonic() + 2.0)


def main(arguments: list[str]) -> None:
    incoming, outgoing, answers = (int(argument) for argument in arguments[:3])
    os.dup2(2, 1)  # what the plugin prints cannot corrupt the protocol
    worker = _Worker(Channel(incoming, outgoing), answers)
    anyio.run(worker.serve)


if __name__ == "__main__":
    main(sys.argv[1:])
