"""Workflows for the Temporal tests: they import pegboard as a user's workflow file would."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

import pegboard
from pegboard.temporal import execute_tool

#: Quick retries, so a killed worker's calls move to the other one within seconds.
RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0)


@workflow.defn
class Calls:
    """Runs the given calls at once on the tools queue; returns their durable outcomes."""

    @workflow.run
    async def run(self, queue: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        async def one(spec: dict[str, Any]) -> dict[str, Any]:
            context = pegboard.ToolContext(
                "session-1", "agent", spec.get("message", "message-1"), spec["call_id"]
            )
            outcome = await execute_tool(
                pegboard.ToolCall(spec["name"], spec["input"], context),
                task_queue=queue,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=2),
                retry_policy=RETRIES,
            )
            return pegboard.dump_outcome(outcome)

        return list(await asyncio.gather(*(one(spec) for spec in calls)))
