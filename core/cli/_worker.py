"""``pegboard worker``: a Location's tools on a Temporal task queue."""

from __future__ import annotations

import argparse
import sys

from ._common import (
    Exit,
    UsageError,
    add_location_options,
    add_secret_options,
    check_trust,
    path,
    secret_values,
    warn,
)
from ._rules import add_permission_options, host_rules
from ._sandbox import add_sandbox_options, sandbox_settings, say_sandbox

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ("add",)


def add(commands: Any) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a Location's tools on a Temporal task queue",
        description="Run a Temporal worker whose activity executes calls with the tools of a "
        "Location, for workflows that call pegboard.temporal.execute_tool. Runs until "
        "interrupted. Requests that the permission rules leave at 'ask' are refused: a "
        "worker has nobody to ask. Needs the temporal extra: pip install 'pegboard[temporal]'.",
    )
    worker.add_argument(
        "--temporal", required=True, metavar="ADDRESS",
        help="the Temporal frontend to connect to, HOST:PORT (for example localhost:7233)",
    )  # fmt: skip
    worker.add_argument(
        "--task-queue", required=True, metavar="QUEUE",
        help="the task queue to poll: the one the workflows pass to execute_tool",
    )  # fmt: skip
    worker.add_argument(
        "--namespace", default="default", metavar="NAME",
        help="the Temporal namespace (default: default)",
    )  # fmt: skip
    worker.add_argument(
        "--journal", type=path, metavar="FILE",
        help="journal calls in the SQLite file FILE, shared by the workers of this machine: "
        "a call whose worker died after its tool finished is answered from it, not run again",
    )  # fmt: skip
    add_location_options(worker)
    add_sandbox_options(worker)
    add_permission_options(worker)
    add_secret_options(worker)
    worker.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    import importlib.util

    import anyio

    if importlib.util.find_spec("temporalio") is None:
        raise UsageError("pegboard worker needs the Temporal SDK: pip install 'pegboard[temporal]'")
    address = arguments.temporal
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"--temporal {address}: not HOST:PORT; give the frontend's address, "
            "for example localhost:7233"
        )
    if not arguments.task_queue.strip():
        raise UsageError("--task-queue: empty; give the queue the workflows schedule calls on")
    if arguments.journal is not None and not arguments.journal.parent.is_dir():
        raise UsageError(
            f"--journal {arguments.journal}: no folder {arguments.journal.parent}; "
            "name a file in an existing folder"
        )
    sandbox = sandbox_settings(arguments)
    rules = host_rules(arguments)
    return anyio.run(_work, arguments, rules, sandbox, backend="asyncio")


async def _work(arguments: argparse.Namespace, rules: list[Any], sandbox: dict[str, Any]) -> int:
    import asyncio

    from temporalio.client import Client
    from temporalio.worker import Worker

    from pegboard import Host, SQLiteJournal
    from pegboard.temporal import ToolActivities

    secrets = secret_values(arguments)

    def open_location() -> Any:
        return Host().location(
            arguments.location,
            plugins=arguments.plugins,
            trusted=arguments.trust,
            permissions=rules,
            secrets=secrets,
            **sandbox,
        )

    try:
        client = await Client.connect(arguments.temporal, namespace=arguments.namespace)
    except RuntimeError as error:  # the SDK's word for a server it cannot reach
        raise ConnectionError(f"cannot reach Temporal at {arguments.temporal}: {error}") from None
    journal = None if arguments.journal is None else SQLiteJournal(arguments.journal)
    activities = ToolActivities(open_location, journal=journal)
    async with activities:
        location = activities.location
        check_trust(arguments, location.enabled)
        for problem in location.plugin_errors:
            warn(problem)
        say_sandbox(location.sandbox, always=False)
        async with Worker(
            client, task_queue=arguments.task_queue, activities=activities.activities
        ):
            print(
                f"pegboard: worker for {location.root} polling task queue "
                f"{arguments.task_queue!r} at {arguments.temporal}",
                file=sys.stderr,
                flush=True,
            )
            await asyncio.Event().wait()
    return Exit.COMPLETED
