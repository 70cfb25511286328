"""A process that runs journaled calls, for the journal's crash and race tests.

    python tests/journal_child.py JOURNAL RUNS CALLS [--hang] [--start FILE]

Each call is ``add`` with ``{"a": i, "b": 1}`` and call ID ``call-i`` (``CALLS``
of them, run concurrently). The tool records ``(call_id, idempotency_key,
attempt, pid)`` in the SQLite file ``RUNS`` before it answers; with ``--hang``
it then waits forever (the test kills the process). With ``--start`` the
process waits until that file exists, so two processes begin together. The
outcomes' durable forms are printed as one JSON list.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio

import pegboard


def record(runs: str, context: pegboard.ToolContext) -> None:
    with sqlite3.connect(runs, timeout=30, isolation_level=None) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS runs (call_id TEXT, key TEXT, attempt INTEGER, pid INTEGER)"
        )
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            (context.call_id, context.idempotency_key, context.attempt, os.getpid()),
        )
    db.close()


async def main(arguments: argparse.Namespace) -> None:
    async def add(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        await anyio.to_thread.run_sync(record, arguments.runs, context)
        if arguments.hang:
            await anyio.sleep_forever()
        return str(value["a"] + value["b"])

    journal = pegboard.SQLiteJournal(arguments.journal)
    async with pegboard.Host().location(Path.cwd(), plugins=[]) as location:
        location.tools.register(
            {
                "add": pegboard.tool(
                    description="Add two numbers.",
                    input={
                        "type": "object",
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "required": ["a", "b"],
                    },
                    execute=add,
                )
            }
        )
        request = location.prepare(journal=journal)
        calls = [
            pegboard.ToolCall(
                "add",
                json.dumps({"a": index, "b": 1}),
                pegboard.ToolContext("session-1", "agent", "message-1", f"call-{index}"),
            )
            for index in range(arguments.calls)
        ]
        outcomes = await request.execute_all(calls)
    print(json.dumps([pegboard.dump_outcome(outcome) for outcome in outcomes]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("journal")
    parser.add_argument("runs")
    parser.add_argument("calls", type=int)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--start")
    parser.add_argument("--backend", default="asyncio")
    parsed = parser.parse_args()
    if parsed.start:
        while not Path(parsed.start).exists():
            time.sleep(0.001)
    anyio.run(main, parsed, backend=parsed.backend)
    sys.exit(0)
