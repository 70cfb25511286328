"""The cancellation check: a call cancelled while its tool awaits must not settle."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import Any, Literal

import anyio
import anyio.to_thread
import attrs

import pegboard
from pegboard._confined import Worker

from ._bench import Bench, Opened, describe_error, describe_outcome, pegboard_warnings
from ._check_generated import simplest_input
from ._report import Findings, NotJudged
from ._subject import Example

__all__ = ("cancellation",)

#: How long a cancelled call may take to unwind through the tool's cleanup.
GRACE_SECONDS = 5.0

_FIX = (
    "let cancellation propagate: never catch it with a bare `except:` or an `except "
    "BaseException:` that does not re-raise; put cleanup in `finally:` (inside "
    "anyio.CancelScope(shield=True) if it must await)"
)


@attrs.define
class _Attempt:
    state: Literal["never awaited", "cancelled", "discarded", "settled", "raised", "hung"] = "hung"
    outcome: pegboard.Outcome | None = None
    error: Exception | None = None


async def cancellation(bench: Bench, findings: Findings) -> None:
    """Cancel one call of each tool while it awaits; it must end cancelled, promptly."""
    inputs = _inputs(bench.subject.examples)
    exercised = 0
    async with bench.open("cancellation", blocking=True) as opened:
        advertised = opened.tools()
        for name, definition in sorted(advertised.items()):
            if name not in inputs and name not in bench.subject.skip:
                # No example: the simplest input the tool's schema accepts.
                found = await anyio.to_thread.run_sync(simplest_input, definition)
                if found is not None:
                    inputs[name] = found
        if not inputs:
            raise NotJudged("no example or generated input reaches a tool; nothing to cancel")
        for tool, raw in inputs.items():
            if tool not in advertised:
                continue  # the examples check reports it
            attempt = await _cancel_one(bench, opened, tool, raw)
            if attempt.state == "never awaited":
                findings.note(f"tool {tool!r} finished without awaiting; nothing to cancel")
                continue
            exercised += 1
            if attempt.state == "discarded":
                findings.problem(
                    f"tool {tool!r} was cancelled while it awaited, yet it returned a result "
                    "(pegboard discarded it): the tool swallowed the cancellation",
                    _FIX,
                )
            elif attempt.state == "settled" and attempt.outcome is not None:
                findings.problem(
                    f"tool {tool!r} was cancelled while it awaited, yet the call settled as "
                    f"{describe_outcome(attempt.outcome)}: the tool swallowed the cancellation",
                    _FIX,
                )
            elif attempt.state == "raised" and attempt.error is not None:
                findings.problem(
                    f"tool {tool!r} was cancelled while it awaited and raised "
                    f"{describe_error(attempt.error)} instead of letting the cancellation through",
                    _FIX,
                )
            elif attempt.state == "hung":
                findings.problem(
                    f"tool {tool!r} was cancelled while it awaited and had not finished "
                    f"{GRACE_SECONDS:g} s later",
                    "cleanup after cancellation must be quick: wait on nothing unbounded in a "
                    "`finally:` or `except` block",
                )
    if not exercised and not findings.problems:
        raise NotJudged("no tool awaited anything while the kit called it; nothing to cancel")


async def _cancel_one(
    bench: Bench, opened: Opened, tool: str, input: Mapping[str, Any] | str
) -> _Attempt:
    """Call ``tool``; once every task is blocked (the tool awaits), cancel the call."""
    attempt = _Attempt()
    finished = anyio.Event()
    scope = anyio.CancelScope()
    request = opened.location.prepare()
    context = bench.context(progress=_wait_for_ever)

    async def call() -> None:
        try:
            with scope:
                attempt.outcome = await request.execute(pegboard.ToolCall(tool, input, context))
        except Exception as error:  # noqa: BLE001 - what the cancelled call raises is a finding
            attempt.error = error
        finally:
            finished.set()

    # The permission approver and progress never answer, and worker threads are
    # held, so a tool that asks, reports or runs a thread is left awaiting.
    worker = bench.worker(opened.location)
    with _discards(context.call_id) as discarded:
        await _cancel(attempt, scope, finished, call, worker)
        if worker is not None:  # the worker says when the cancelled tool is over there
            with anyio.move_on_after(GRACE_SECONDS):
                while worker.running:  # noqa: ASYNC110 - set from the worker's pipe
                    await anyio.sleep(0.001)
            if worker.running:
                attempt.state = "hung"
        # A confined tool swallowed the cancellation only if its worker says so: here,
        # an answer that crossed the cancellation on the pipe is dropped all the same.
        swallowed = discarded if worker is None else context.call_id in worker.discarded
        if attempt.state == "cancelled" and swallowed:
            attempt.state = "discarded"  # the pipeline dropped what the tool returned
    bench.forget(context.call_id)
    return attempt


async def _cancel(
    attempt: _Attempt,
    scope: anyio.CancelScope,
    finished: anyio.Event,
    call: Callable[[], Coroutine[Any, Any, None]],
    worker: Worker | None,
) -> None:
    async with _threads_held(), anyio.create_task_group() as group:
        sent = 0 if worker is None else worker.calls_sent
        group.start_soon(call)
        if worker is None:
            await anyio.wait_all_tasks_blocked()
        else:
            # A confined tool runs in its worker: once that loop answers after the
            # call reached it, the tool ran up to what it awaits (or finished).
            with anyio.move_on_after(GRACE_SECONDS):  # a loop the tool holds answers late
                # Either may come first: a call refused here never reaches the worker.
                while worker.calls_sent == sent and not finished.is_set():  # noqa: ASYNC110
                    await anyio.sleep(0.001)
                await worker.ping()
                if not worker.running:
                    # It answered before the ping: done before it could be cancelled.
                    await finished.wait()
        if finished.is_set():
            attempt.state = "never awaited"
        else:
            scope.cancel()
            with anyio.move_on_after(GRACE_SECONDS):
                await finished.wait()
            if not finished.is_set():
                group.cancel_scope.cancel()
            elif attempt.error is not None:
                attempt.state = "raised"
            elif scope.cancelled_caught:
                attempt.state = "cancelled"
            else:
                attempt.state = "settled"


def _discards(call_id: str) -> contextlib.AbstractContextManager[list[str]]:
    """Collect pegboard's warnings that it discarded the result of call ``call_id``."""
    return pegboard_warnings(
        lambda message: (
            message.startswith("discarded the result") and f"(call {call_id})" in message
        )
    )


async def _wait_for_ever(progress: pegboard.Progress) -> None:
    await anyio.sleep_forever()


@contextlib.asynccontextmanager
async def _threads_held() -> AsyncIterator[None]:
    """Borrow every token of the default thread limiter for the duration.

    A tool that runs work in a worker thread then waits for a token, and that
    wait can be cancelled (a running worker thread cannot).
    """
    limiter = anyio.to_thread.current_default_thread_limiter()
    borrowers: list[object] = []
    try:
        while not math.isinf(limiter.total_tokens) and limiter.available_tokens >= 1:
            borrower = object()
            await limiter.acquire_on_behalf_of(borrower)
            borrowers.append(borrower)
        yield
    finally:
        for borrower in borrowers:
            limiter.release_on_behalf_of(borrower)


def _inputs(examples: Iterable[Example]) -> dict[str, Mapping[str, Any] | str]:
    """The first valid example input of each tool."""
    found: dict[str, Mapping[str, Any] | str] = {}
    for example in examples:
        if example.expect != "invalid_input" and example.tool not in found:
            found[example.tool] = example.input
    return found
