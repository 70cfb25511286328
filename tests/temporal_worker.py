"""A Temporal worker process for the tests: a Location whose tools record their runs.

    python tests/temporal_worker.py ADDRESS QUEUE JOURNAL RUNS

Tools (all take ``{"n": integer}``):

- ``work`` records its start, sleeps ``n`` hundredths of a second, records its
  finish, and answers ``n + 1``;
- ``hang`` records its start and waits until cancelled, recording that;
- ``flaky`` raises on attempt 1 (a defect) and answers its attempt after;
- ``refuse`` fails with a ToolFailure.

Each record is ``(event, call_id, idempotency_key, attempt, pid, time)`` in
the SQLite file ``RUNS``. Calls go through the SQLite journal ``JOURNAL``
(``-`` for none). The worker prints ``ready`` once it polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from temporalio.client import Client
from temporalio.worker import Worker

import pegboard
from pegboard.temporal import ToolActivities


def record(runs: str, event: str, context: pegboard.ToolContext) -> None:
    db = sqlite3.connect(runs, timeout=30, isolation_level=None)
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS runs "
            "(event TEXT, call_id TEXT, key TEXT, attempt INTEGER, pid INTEGER, time REAL)"
        )
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
            (
                event,
                context.call_id,
                context.idempotency_key,
                context.attempt,
                os.getpid(),
                time.time(),
            ),
        )
    finally:
        db.close()


def tools(runs: str) -> dict[str, pegboard.Tool]:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def work(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        record(runs, "started", context)
        await anyio.sleep(value["n"] / 100)
        record(runs, "finished", context)
        return str(value["n"] + 1)

    async def hang(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        record(runs, "started", context)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            record(runs, "cancelled", context)
            raise
        raise AssertionError("unreachable")

    async def flaky(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        record(runs, "started", context)
        if context.attempt == 1:
            raise LookupError("a bug that the second attempt does not hit")
        return f"attempt {context.attempt}"

    async def refuse(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        record(runs, "started", context)
        raise pegboard.ToolFailure("no such account")

    return {
        name: pegboard.tool(description=f"The {name} tool.", input=schema, execute=execute)
        for name, execute in {
            "work": work,
            "hang": hang,
            "flaky": flaky,
            "refuse": refuse,
        }.items()
    }


async def main(address: str, queue: str, journal: str, runs: str) -> None:
    @contextlib.asynccontextmanager
    async def open_location() -> AsyncIterator[pegboard.Location]:
        async with pegboard.Host().location(Path.cwd(), plugins=[]) as location:
            location.tools.register(tools(runs))
            yield location

    client = await Client.connect(address)
    opened = None if journal == "-" else pegboard.SQLiteJournal(journal)
    activities = ToolActivities(open_location, journal=opened)
    async with activities, Worker(client, task_queue=queue, activities=activities.activities):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
