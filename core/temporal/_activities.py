"""The worker side: a Location opened once, its tools run as one Temporal activity."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

import pegboard
from pegboard._journal import check_journal

from ._payload import load_call

__all__ = ("ACTIVITY", "ToolActivities")

#: The name of the activity that executes one call.
ACTIVITY = "pegboard.execute_tool"

#: How often a running tool heartbeats when the activity has no heartbeat timeout.
_BEAT = timedelta(seconds=5)


class ToolActivities:
    """The activities a Temporal worker needs to run a Location's tools.

    ``open_location`` is a factory of an async context manager that yields a
    `pegboard.Location` (``lambda: host.location(root)``, say); entering
    ``async with ToolActivities(open_location) as tools`` opens it once, and
    leaving closes it. Give ``tools.activities`` to ``temporalio.worker.Worker``.
    With a ``journal`` (a `pegboard.CallJournal`), every call goes through it,
    so a call whose worker died after the tool finished is answered from the
    journal when Temporal retries it, instead of running again.

    The activity takes `call_payload`'s form and returns the outcome's durable
    form (`pegboard.dump_outcome`). While the tool runs it heartbeats (a third
    of the heartbeat timeout apart), sending progress messages as details;
    Temporal's cancellation cancels the call, which then has no outcome;
    ``context.attempt`` is Temporal's attempt number. A `pegboard.Failed`
    outcome is returned, not raised. A defect or a `pegboard.RetentionError`
    raises, and Temporal retries it; a malformed payload, a
    `pegboard.JournalConflict` or a `pegboard.PermissionRejected` (the host's
    rules refused, or left at "ask" with no approver) is a non-retryable error.
    """

    def __init__(
        self,
        open_location: Callable[[], contextlib.AbstractAsyncContextManager[pegboard.Location]],
        *,
        journal: pegboard.CallJournal | None = None,
    ) -> None:
        if not callable(open_location):
            raise TypeError(
                "ToolActivities takes a function that opens the Location, such as "
                f"lambda: host.location(root), got {type(open_location).__name__}"
            )
        if journal is not None:
            check_journal(journal, "ToolActivities")
        self._open = open_location
        self._journal = journal
        self._location: pegboard.Location | None = None
        self._exits: contextlib.AsyncExitStack | None = None

        @activity.defn(name=ACTIVITY)
        async def execute_tool(payload: dict[str, Any]) -> dict[str, Any]:
            return await self._execute(payload)

        #: The activities to give ``temporalio.worker.Worker(activities=...)``.
        self.activities: list[Callable[..., Any]] = [execute_tool]

    @property
    def location(self) -> pegboard.Location:
        """The open Location (``RuntimeError`` outside ``async with``)."""
        if self._location is None:
            raise RuntimeError(
                "the ToolActivities Location is not open: run the worker inside "
                "async with ToolActivities(open_location) as tools"
            )
        return self._location

    async def __aenter__(self) -> ToolActivities:
        if self._exits is not None:
            raise RuntimeError("ToolActivities is already open; enter it once")
        exits = contextlib.AsyncExitStack()
        async with exits:
            location = await exits.enter_async_context(self._open())
            if not isinstance(location, pegboard.Location):
                raise TypeError(
                    "ToolActivities: open_location() must yield a pegboard.Location, "
                    f"got {type(location).__name__}"
                )
            self._exits = exits.pop_all()
        self._location = location
        return self

    async def __aexit__(self, *details: Any) -> None:
        exits, self._exits, self._location = self._exits, None, None
        if exits is not None:
            await exits.__aexit__(*details)

    async def _execute(self, payload: dict[str, Any]) -> dict[str, Any]:
        location = self._location
        if location is None:
            # Retryable: another worker, or this one once open, can run it.
            raise ApplicationError(
                "pegboard.temporal: this worker's Location is not open; run the worker "
                "inside async with ToolActivities(open_location) as tools"
            )
        info = activity.info()

        async def progress(update: pegboard.Progress) -> None:
            activity.heartbeat(update.message)

        try:
            call = load_call(payload, attempt=info.attempt, progress=progress)
        except ValueError as error:
            raise ApplicationError(str(error), type="InvalidCall", non_retryable=True) from None
        beat = (info.heartbeat_timeout or _BEAT * 3) / 3
        request = location.prepare(journal=self._journal)
        outcomes: list[pegboard.Outcome] = []
        defects: list[Exception] = []

        async def heartbeat() -> None:
            while True:
                activity.heartbeat()
                await anyio.sleep(beat.total_seconds())

        async with anyio.create_task_group() as group:
            group.start_soon(heartbeat)
            try:
                outcomes.append(await request.execute(call))
            except Exception as defect:  # noqa: BLE001 - raised below, outside the group
                defects.append(defect)
            group.cancel_scope.cancel()
        if defects:
            raised = defects[0]
            # Neither comes right by retrying: a runner's bug, or the host's rules.
            if isinstance(raised, pegboard.JournalConflict | pegboard.PermissionRejected):
                raise ApplicationError(
                    location.redact(str(raised)), type=type(raised).__name__, non_retryable=True
                ) from None
            told = "".join(traceback.format_exception(raised))
            redacted = location.redact(told)
            if redacted != told:
                # Temporal keeps an activity's error, its causes and their tracebacks in
                # the workflow's history: one that holds a secret goes there redacted.
                raise ApplicationError(
                    location.redact(str(raised)), redacted, type=_qualified(type(raised))
                ) from None
            raise raised
        return pegboard.dump_outcome(outcomes[0])


def _qualified(kind: type[BaseException]) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
