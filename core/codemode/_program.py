"""Running one program: each tool it calls goes through the captured request."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc

from pegboard import (
    Completed,
    ContentItem,
    Outcome,
    Progress,
    Request,
    Text,
    ToolCall,
    ToolContext,
    ToolFailure,
    ToolLog,
    thaw,
)

from ._limits import CodeModeLimits
from ._sandbox import Session, require

__all__ = ("run_program",)

# The portable tool search: in a program it returns the list of matches.
_SEARCH_TOOLS = "search_tools"
# What a program may print before the rest is dropped; the execute call's
# content is bounded like any other, this only caps what is held in memory.
_PRINT_CHARACTERS = 1024 * 1024
# How much printed output a failure message repeats.
_FAILURE_TAIL = 2000


class _Printed:
    """The program's print() output, kept up to a cap (called from worker threads)."""

    __slots__ = ("dropped", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.dropped = False

    def __call__(self, stream: str, text: str) -> None:
        if self.dropped or self.size + len(text) > _PRINT_CHARACTERS:  # keep a prefix
            self.dropped = True
            return
        self.size += len(text)
        self.parts.append(text)

    def text(self) -> str:
        joined = "".join(self.parts)
        if self.dropped:
            joined += f"\n[printed output past {_PRINT_CHARACTERS} characters was dropped]\n"
        return joined


class _Calls:
    """A program's tool calls, each running in the program's task group."""

    def __init__(
        self,
        request: Request,
        context: ToolContext,
        with_output: frozenset[str],
    ) -> None:
        self._request = request
        self._context = context
        self._with_output = with_output
        self.count = 0
        #: Settled answers for the sandbox, by the sandbox's own call id.
        self.results: dict[int, dict[str, Any]] = {}
        #: An unexpected exception from a tool: it ends the program and propagates.
        self.error: Exception | None = None
        self._settled = anyio.Event()

    def start(self, group: anyio.abc.TaskGroup, sandbox_id: int, name: str, arguments: Any) -> None:
        self.count += 1
        group.start_soon(self._run, sandbox_id, name, self.count, arguments)

    def sleep(self, group: anyio.abc.TaskGroup, sandbox_id: int, seconds: float) -> None:
        """Settle ``sandbox_id`` after ``seconds``: the program's ``asyncio.sleep``."""

        async def sleep() -> None:
            await anyio.sleep(seconds)
            self.results[sandbox_id] = {"return_value": None}
            self._settled.set()

        group.start_soon(sleep)

    async def _run(self, sandbox_id: int, name: str, number: int, arguments: Any) -> None:
        outer = self._context
        call_id = f"{outer.call_id}/{number}"
        await outer.progress(Progress(message=f"{name} ({call_id})", current=number))

        async def forward(update: Progress) -> None:
            # The inner tool's own progress reaches the runner by message only:
            # its partial content belongs to the inner call, not to execute.
            if update.message is not None:
                await outer.progress(
                    Progress(
                        message=f"{call_id}: {update.message}",
                        current=update.current,
                        total=update.total,
                    )
                )

        async def log(record: ToolLog) -> None:
            await outer.log(record.level, f"{call_id}: {record.message}", record.data)

        context = ToolContext(
            outer.session_id, outer.agent, outer.message_id, call_id, progress=forward, log=log
        )
        try:
            outcome = await self._request.execute(ToolCall(name, arguments, context))
        except Exception as error:  # noqa: BLE001 - handed to the runner unchanged
            self.error = error
        else:
            self.results[sandbox_id] = self._answer(name, outcome)
        self._settled.set()

    def _answer(self, name: str, outcome: Outcome) -> dict[str, Any]:
        if isinstance(outcome, Completed):
            if name == _SEARCH_TOOLS:  # the matches themselves, not their wrapper
                return {"return_value": thaw(outcome.output)["tools"]}
            if name in self._with_output:
                return {"return_value": thaw(outcome.output)}
            return {"return_value": content_text(outcome.content)}
        error = outcome.error
        return {"exception": RuntimeError(f"tool {name!r} failed ({error.kind}): {error.message}")}

    async def wait(self, pending: list[int]) -> dict[int, dict[str, Any]]:
        """The settled answers among ``pending``, waiting for at least one."""
        while True:
            ready = {key: self.results.pop(key) for key in pending if key in self.results}
            if ready or self.error is not None:
                return ready
            self._settled = anyio.Event()
            await self._settled.wait()


def content_text(content: tuple[ContentItem, ...]) -> str:
    """A tool's model content as one text, media named by a placeholder."""
    parts = []
    for item in content:
        if isinstance(item, Text):
            parts.append(item.text)
        else:
            parts.append(f"[{type(item).__name__.lower()} content omitted]")
    return "\n".join(parts)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


async def run_program(
    code: str,
    request: Request,
    functions: Mapping[str, str],
    context: ToolContext,
    limits: CodeModeLimits,
) -> str:
    """Run ``code`` and return its content: what it printed, then its final value.

    Raises `pegboard.ToolFailure` when the program fails or hits a limit; an
    unexpected exception from a tool propagates unchanged; cancellation
    cancels the program and its tool calls.
    """
    monty = require()
    with_output = frozenset(
        d.name for d in (*request.definitions, *request.deferred) if d.output_schema is not None
    )
    calls = _Calls(request, context, with_output)
    printed = _Printed()
    failure: str | None = None
    value: Any = None
    async with anyio.create_task_group() as group:
        try:
            with anyio.move_on_after(limits.wall_time) as deadline:
                session = await Session.open(limits)
                try:
                    failure, value = await _drive(
                        monty, session, code, functions, calls, group, printed, limits
                    )
                finally:
                    await session.close()
        finally:
            # Tool calls the program left running; cancelled outside the
            # deadline's scope, so a timeout is still seen as one.
            group.cancel_scope.cancel()
        if deadline.cancelled_caught:
            failure = (
                f"the program was stopped after {limits.wall_time:g} s, its time limit "
                "(tool calls included); do less in one program, or split the work "
                "across several execute calls"
            )
    if calls.error is not None:
        raise calls.error
    text = printed.text()
    if failure is not None:
        if text:
            failure += f"\nIt printed before it stopped:\n{text[-_FAILURE_TAIL:]}"
        raise ToolFailure(failure)
    parts = [text.rstrip("\n")] if text else []
    if value is not None:
        parts.append(_render(value))
    return "\n".join(parts) or "(the program printed nothing and its last expression was None)"


class _Advance:
    """Runs the program in a worker thread up to the next point that needs the
    event loop, answering the tool calls it makes on the way with futures.

    Started calls are collected in ``batch`` for the loop to run, so a program
    that gathers N calls costs one hand-off between threads, not N.
    """

    __slots__ = ("batch", "budget", "functions", "monty", "over")

    def __init__(self, monty: Any, functions: Mapping[str, str], budget: int) -> None:
        self.monty = monty
        self.functions = functions
        self.budget = budget
        self.batch: list[tuple[int, str, dict[str, Any]]] = []
        self.over = False

    def __call__(self, first: Callable[[], Any]) -> Any:
        snapshot = first()
        while isinstance(snapshot, self.monty.FunctionSnapshot) and not snapshot.is_os_function:
            function = snapshot.function_name
            name = self.functions.get(function)
            answer: dict[str, Any]
            if name is None:
                known = ", ".join(sorted(self.functions)) or "(none)"
                message = f"name {function!r} is not defined; the tools are: {known}"
                answer = {"exception": NameError(message)}
            elif snapshot.args:
                message = f"{function}() takes keyword arguments only, as its signature shows"
                answer = {"exception": TypeError(message)}
            elif len(self.batch) >= self.budget:
                self.over = True
                return snapshot
            else:
                self.batch.append((snapshot.call_id, name, dict(snapshot.kwargs)))
                answer = {"future": ...}
            snapshot = snapshot.resume(answer)
        return snapshot


async def _drive(
    monty: Any,
    session: Session,
    code: str,
    functions: Mapping[str, str],
    calls: _Calls,
    group: anyio.abc.TaskGroup,
    printed: _Printed,
    limits: CodeModeLimits,
) -> tuple[str | None, Any]:
    """Step the program to its end; return ``(failure message, final value)``."""

    async def step(first: Callable[[], Any]) -> Any:
        advance = _Advance(monty, functions, limits.calls - calls.count)
        snapshot = await session.step(advance, first)
        for sandbox_id, name, arguments in advance.batch:
            calls.start(group, sandbox_id, name, arguments)
        if advance.over:
            raise _OverBudget
        return snapshot

    try:
        snapshot = await step(partial(session.session.feed_start, code, print_callback=printed))
        while not isinstance(snapshot, monty.MontyComplete):
            if isinstance(snapshot, monty.FutureSnapshot):
                ready = await calls.wait(snapshot.pending_call_ids)
                if calls.error is not None:
                    return None, None
                snapshot = await step(partial(snapshot.resume, ready))
            elif isinstance(snapshot, monty.NameLookupSnapshot):
                function = snapshot.variable_name
                if function in functions:
                    snapshot = await step(partial(snapshot.resume, value=_handle(function)))
                else:
                    snapshot = await step(snapshot.resume)
            else:  # an OS call: _Advance answers every other function call
                function = str(snapshot.function_name)
                seconds = _seconds(snapshot.args)
                answer: dict[str, Any]
                if function in _SLEEPS and isinstance(seconds, dict):
                    answer = seconds  # a bad length raises in the program
                elif function == "system.async_sleep":
                    calls.sleep(group, snapshot.call_id, max(seconds, 0.0))
                    answer = {"future": ...}
                elif function == "system.sleep" and seconds < 0:
                    answer = {"exception": ValueError("sleep length must be non-negative")}
                elif function == "system.sleep":
                    await anyio.sleep(seconds)  # the wall clock bounds it
                    answer = {"return_value": None}
                else:
                    # With no mount and no os handler, Monty's own answer:
                    # files, the environment and the rest are refused.
                    snapshot = await step(snapshot.resume_auto)
                    continue
                snapshot = await step(partial(snapshot.resume, answer))
    except _OverBudget:
        return (
            f"the program tried to make more than {limits.calls} tool calls, "
            "the limit for one execute call; make fewer, larger calls (one grep "
            "instead of many reads) or split the work across execute calls",
            None,
        )
    except monty.MontySyntaxError as error:
        return f"the program is not valid Python:\n{error.display()}", None
    except monty.MontyTypingError as error:
        return f"the program does not type-check:\n{error.display()}", None
    except monty.MontyRuntimeError as error:
        return _runtime_failure(error.display(), error.display("type-msg"), limits), None
    except monty.MontyError as error:
        return (
            f"the sandbox stopped the program ({error}); simplify it and try again",
            None,
        )
    return None, snapshot.output


class _OverBudget(Exception):  # noqa: N818 - a signal inside _drive, never raised out of it
    """The program asked for one tool call more than its limit."""


_SLEEPS = frozenset({"system.sleep", "system.async_sleep"})


def _seconds(args: tuple[Any, ...]) -> Any:
    """A sleep's length in seconds, or the answer that raises for a bad one
    (``asyncio.sleep`` takes a negative length as zero, ``time.sleep`` refuses it).
    """
    value = args[0] if len(args) == 1 else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return {"exception": TypeError("sleep() takes one number of seconds")}
    return float(value)


def _runtime_failure(traceback: str, summary: str, limits: CodeModeLimits) -> str:
    if summary.startswith("MemoryError: memory limit exceeded"):
        return (
            f"the program used more than {limits.memory} bytes of memory, its limit; "
            f"keep less in memory at once (process items one by one)\n{traceback}"
        )
    if summary.startswith("TimeoutError: feed time limit exceeded"):
        return (
            f"the program computed for more than {limits.wall_time:g} s, its time limit; "
            f"do less in one program\n{traceback}"
        )
    return f"the program raised an exception:\n{traceback}"


def _handle(function: str) -> Any:
    # A tool named in an expression (not called) is a host function whose
    # name routes its later calls back here.
    def call(**_: Any) -> None:
        raise RuntimeError("answered by the host, never run")

    call.__name__ = call.__qualname__ = function
    return call
