"""pegboard.temporal against a real Temporal dev server: workers hold a Location."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

import pegboard
from pegboard.temporal import ToolActivities, call_payload, load_call

HERE = Path(__file__).resolve().parent
WORKER = HERE / "temporal_worker.py"


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's client and worker run on asyncio alone."""
    return "asyncio"


def records(runs: Path, event: str | None = None) -> list[tuple[Any, ...]]:
    """The runs the workers' tools recorded, optionally of one event."""
    if not runs.exists():
        return []
    db = sqlite3.connect(runs, timeout=30)
    try:
        found = db.execute(
            "SELECT event, call_id, key, attempt, pid, time FROM runs ORDER BY time"
        ).fetchall()
    except sqlite3.OperationalError as error:
        if "no such table" not in str(error):
            raise
        found = []
    finally:
        db.close()
    return [row for row in found if event is None or row[0] == event]


def journal_settled(path: Path) -> set[str]:
    """The call IDs the SQLite journal at ``path`` holds settled."""
    db = sqlite3.connect(path, timeout=30)
    try:
        rows = db.execute("SELECT call_id FROM pegboard_calls WHERE outcome IS NOT NULL")
        return {call_id for (call_id,) in rows}
    finally:
        db.close()


class Workers:
    """Worker processes of one tools queue, sharing a journal and a runs file."""

    def __init__(self, address: str, folder: Path) -> None:
        self.address = address
        self.queue = f"tools-{uuid.uuid4().hex[:8]}"
        self.journal = folder / "journal.db"
        self.runs = folder / "runs.db"
        self.folder = folder
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, count: int) -> None:
        for _ in range(count):
            with (self.folder / "worker.log").open("a") as log:
                self.processes.append(self._spawn(log))
        for process in self.processes[-count:]:
            assert process.stdout is not None
            started = process.stdout.readline().strip()
            assert "ready" == started, (self.folder / "worker.log").read_text()

    def _spawn(self, log: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                self.address,
                self.queue,
                str(self.journal),
                str(self.runs),
            ],
            cwd=self.folder,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture(scope="module")
def shared_workers(
    temporal_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Workers]:
    """One worker process the quick tests share."""
    workers = Workers(temporal_server, tmp_path_factory.mktemp("workers"))
    workers.start(1)
    try:
        yield workers
    finally:
        workers.stop()


@contextlib.asynccontextmanager
async def flows(address: str) -> AsyncIterator[tuple[Client, str]]:
    """A client, and a worker in this process running the test workflows."""
    from temporal_flows import Calls

    client = await Client.connect(address)
    queue = f"flows-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[Calls]):
        yield client, queue


def spec(name: str, call_id: str, n: int = 0) -> dict[str, Any]:
    return {"name": name, "call_id": call_id, "input": json.dumps({"n": n})}


async def run_calls(
    client: Client, flows_queue: str, tools_queue: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    from temporal_flows import Calls

    result: list[dict[str, Any]] = await client.execute_workflow(
        Calls.run,
        args=[tools_queue, calls],
        id=f"calls-{uuid.uuid4()}",
        task_queue=flows_queue,
    )
    return result


@pytest.mark.anyio
@pytest.mark.timeout(240)
async def test_a_killed_worker_s_calls_finish_on_the_other_and_finished_tools_ran_once(
    temporal_server: str, tmp_path: Path
) -> None:
    """100 calls on 2 worker processes, one killed with kill -9 mid-run: every call gets
    its outcome; a tool that had finished before the kill ran once (counted by
    idempotency_key); the calls that ran again saw attempt 2 or more.
    """
    workers = Workers(temporal_server, tmp_path)
    workers.start(2)
    victim = workers.processes[0]
    try:
        calls = [spec("work", f"call-{index}", n=5 + index % 20 * 10) for index in range(100)]
        results: list[list[dict[str, Any]]] = []
        async with flows(temporal_server) as (client, queue), anyio.create_task_group() as group:

            async def run() -> None:
                results.append(await run_calls(client, queue, workers.queue, calls))

            group.start_soon(run)
            # Kill the victim once it has finished some calls and has some running.
            with anyio.fail_after(60):
                while True:
                    mine = [row for row in records(workers.runs) if row[4] == victim.pid]
                    done = {row[1] for row in mine if row[0] == "finished"}
                    running = {row[1] for row in mine if row[0] == "started"} - done
                    if len(done) >= 5 and running:
                        break
                    await anyio.sleep(0.02)
            os.kill(victim.pid, signal.SIGKILL)
            # What the journal held settled at the kill: those tools had finished.
            settled = journal_settled(workers.journal)
        (outcomes,) = results
    finally:
        workers.stop()
    assert [str(6 + index % 20 * 10) for index in range(100)] == [
        outcome["content"][0]["text"] for outcome in outcomes
    ]
    assert {"completed"} == {outcome["status"] for outcome in outcomes}
    rows = records(workers.runs)
    starts: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        if row[0] == "started":
            starts.setdefault(row[2], []).append(row)
    keys = {row[1]: row[2] for row in rows}
    finished_before = {keys[call_id] for call_id in settled}
    assert finished_before
    assert dict.fromkeys(finished_before, 1) == {key: len(starts[key]) for key in finished_before}
    rerun = {key: runs for key, runs in starts.items() if len(runs) > 1}
    assert rerun, "the victim had calls running: they must have run again"
    for runs in rerun.values():
        assert [runs[0][4]] == [victim.pid]
        assert all(row[3] >= 2 for row in runs[1:])
    # Every call's key is the one its context derives.
    expected = {
        pegboard.ToolContext("session-1", "agent", "message-1", f"call-{index}").idempotency_key
        for index in range(100)
    }
    assert expected == set(starts)


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_cancelling_the_workflow_cancels_running_calls_and_settles_nothing(
    temporal_server: str, shared_workers: Workers
) -> None:
    """A cancelled workflow cancels its running tools; they have no outcome, in the journal
    or anywhere: the calls could run again at once.
    """
    from temporal_flows import Calls

    prefix = uuid.uuid4().hex[:8]
    calls = [spec("hang", f"{prefix}-{index}") for index in range(3)]
    async with flows(temporal_server) as (client, queue):
        handle = await client.start_workflow(
            Calls.run,
            args=[shared_workers.queue, calls],
            id=f"hang-{prefix}",
            task_queue=queue,
        )
        with anyio.fail_after(60):
            while True:
                started = [r for r in records(shared_workers.runs, "started") if prefix in r[1]]
                if len(started) == 3:
                    break
                await anyio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert isinstance(failure.value.cause, CancelledError)
    cancelled = {r[1] for r in records(shared_workers.runs, "cancelled") if prefix in r[1]}
    assert {call["call_id"] for call in calls} == cancelled
    db = sqlite3.connect(shared_workers.journal)
    try:
        stored = db.execute(
            "SELECT outcome, holder FROM pegboard_calls WHERE call_id LIKE ?", (f"{prefix}-%",)
        ).fetchall()
    finally:
        db.close()
    assert [(None, None)] * 3 == stored


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_failed_outcomes_are_results_and_defects_are_retried(
    temporal_server: str, shared_workers: Workers
) -> None:
    """A ToolFailure comes back as a Failed outcome, run once; a defect is retried, and the
    retry sees attempt 2 with the same idempotency key.
    """
    prefix = uuid.uuid4().hex[:8]
    async with flows(temporal_server) as (client, queue):
        refused, flaky = await run_calls(
            client,
            queue,
            shared_workers.queue,
            [spec("refuse", f"{prefix}-refuse"), spec("flaky", f"{prefix}-flaky")],
        )
    assert "failed" == refused["status"]
    assert "tool_failure" == refused["error"]["kind"]
    assert "no such account" in refused["error"]["message"]
    assert "attempt 2" == flaky["content"][0]["text"]
    runs = [r for r in records(shared_workers.runs, "started") if prefix in r[1]]
    assert [(f"{prefix}-refuse", 1)] == [(r[1], r[3]) for r in runs if "refuse" in r[1]]
    flaky_runs = [r for r in runs if "flaky" in r[1]]
    assert [1, 2] == [r[3] for r in flaky_runs]
    assert 1 == len({r[2] for r in flaky_runs})


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_a_call_sent_again_by_another_workflow_is_answered_from_the_journal(
    temporal_server: str, shared_workers: Workers
) -> None:
    """The same session and call ID in a second workflow: its tool does not run again."""
    prefix = uuid.uuid4().hex[:8]
    call = spec("work", f"{prefix}-once", n=1)
    async with flows(temporal_server) as (client, queue):
        first = await run_calls(client, queue, shared_workers.queue, [call])
        again = await run_calls(client, queue, shared_workers.queue, [call])
    assert first == again
    assert 1 == len([r for r in records(shared_workers.runs, "started") if prefix in r[1]])


def context() -> pegboard.ToolContext:
    return pegboard.ToolContext("session-1", "agent", "message-1", "call-1")


def test_call_payload_round_trips_text_bytes_and_mappings() -> None:
    """Raw text stays text, bytes become text, a mapping becomes plain JSON."""
    for raw, expected in (
        ('{"n": 1}', '{"n": 1}'),
        (b'{"n": 1}', '{"n": 1}'),
        (pegboard.FrozenDict({"n": 1}), {"n": 1}),
    ):
        payload = call_payload(pegboard.ToolCall("work", raw, context()))
        assert expected == payload["input"]
        assert payload == json.loads(json.dumps(payload))
        loaded = load_call(payload, attempt=3)
        assert (loaded.name, loaded.context.call_id, loaded.context.attempt) == (
            "work",
            "call-1",
            3,
        )
        assert context().idempotency_key == loaded.context.idempotency_key


def test_call_payload_refuses_what_cannot_cross() -> None:
    """Bytes that are not UTF-8 and values that are not calls are one clear error each."""
    with pytest.raises(ValueError, match="input bytes are not UTF-8"):
        call_payload(pegboard.ToolCall("work", b"\xff", context()))
    with pytest.raises(TypeError, match=r"takes a pegboard\.ToolCall"):
        call_payload({"name": "work"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"name": "work"}, "pegboard_call: 1"),
        ({"pegboard_call": 1, "name": 3, "input": "{}", "context": {}}, r"\$.name"),
        ({"pegboard_call": 1, "name": "w", "input": 3, "context": {}}, r"\$.input"),
        ({"pegboard_call": 1, "name": "w", "input": "{}", "context": {}}, r"\$.context"),
    ],
)
def test_load_call_names_what_is_wrong(payload: dict[str, Any], message: str) -> None:
    """A malformed payload says where it is wrong."""
    with pytest.raises(ValueError, match=message):
        load_call(payload)


@contextlib.asynccontextmanager
async def opened_location(tmp_path: Path) -> AsyncIterator[pegboard.Location]:
    async def echo(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        await context.progress(pegboard.Progress(message="halfway"))
        return f"attempt {context.attempt}"

    async with pegboard.Host().location(tmp_path, plugins=[]) as location:
        location.tools.register(
            {"echo": pegboard.tool(description="Echo.", input={"type": "object"}, execute=echo)}
        )
        yield location


@pytest.mark.anyio
async def test_the_activity_passes_temporals_attempt_and_heartbeats_progress(
    tmp_path: Path,
) -> None:
    """context.attempt is Temporal's attempt number; progress messages become heartbeats."""
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, attempt=3)
    beats: list[tuple[Any, ...]] = []
    environment.on_heartbeat = lambda *details: beats.append(details)
    async with ToolActivities(lambda: opened_location(tmp_path)) as tools:
        (activity,) = tools.activities
        payload = call_payload(pegboard.ToolCall("echo", "{}", context()))
        result = await environment.run(activity, payload)
    assert "attempt 3" == pegboard.load_outcome(result).content[0].text  # type: ignore[union-attr]
    assert ("halfway",) in beats


@pytest.mark.anyio
async def test_a_malformed_call_or_a_journal_conflict_is_not_retried(tmp_path: Path) -> None:
    """A payload that is not a call, or a call ID reused for another call, fails for good."""
    environment = ActivityEnvironment()
    journal = pegboard.SQLiteJournal(tmp_path / "journal.db")
    async with ToolActivities(lambda: opened_location(tmp_path), journal=journal) as tools:
        (activity,) = tools.activities
        with pytest.raises(ApplicationError) as malformed:
            await environment.run(activity, {"name": "echo"})
        assert malformed.value.non_retryable
        await environment.run(activity, call_payload(pegboard.ToolCall("echo", "{}", context())))
        other = call_payload(pegboard.ToolCall("echo", '{"other": 1}', context()))
        with pytest.raises(ApplicationError, match="call 'call-1'") as conflict:
            await environment.run(activity, other)
        assert conflict.value.non_retryable
        assert "JournalConflict" == conflict.value.type
    journal.close()


TOKEN = "ghp_4e1Xq9ZpT0k3nW7sLr2Yv8Bd"


@contextlib.asynccontextmanager
async def secret_location(tmp_path: Path) -> AsyncIterator[pegboard.Location]:
    """A Location with a secret, whose tools raise with it in the message or a cause."""

    async def leaks(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        try:
            raise KeyError(f"looked up {TOKEN}")
        except KeyError as error:
            raise RuntimeError(f"bug near {TOKEN}") from error

    async def hides(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        raise LookupError(f"nothing at {base64.b64encode(TOKEN.encode()).decode()}")

    async def plain(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        raise LookupError("nothing secret")

    async def reports(value: dict[str, Any], context: pegboard.ToolContext) -> str:
        await context.progress(pegboard.Progress(message=f"logged in with {TOKEN}"))
        return f"done with {TOKEN}"

    async with pegboard.Host().location(tmp_path, plugins=[], secrets={"TOKEN": TOKEN}) as location:
        schema = {"type": "object"}
        location.tools.register(
            {
                name: pegboard.tool(description="Raise.", input=schema, execute=execute)
                for name, execute in (
                    ("leaks", leaks),
                    ("hides", hides),
                    ("plain", plain),
                    ("reports", reports),
                )
            }
        )
        yield location


@pytest.mark.anyio
async def test_a_defect_holding_a_secret_reaches_temporal_redacted(tmp_path: Path) -> None:
    """Temporal keeps an activity's error (message, causes, tracebacks) in the workflow's
    history: a defect whose text holds a secret is sent redacted, and is still retried.
    """
    converter = DataConverter.default
    async with ToolActivities(lambda: secret_location(tmp_path)) as tools:
        (activity,) = tools.activities
        sent: dict[str, str] = {}
        raised: dict[str, BaseException] = {}
        for name in ("leaks", "hides", "plain"):
            call = pegboard.ToolCall(name, "{}", context())
            with pytest.raises(Exception) as error:  # noqa: PT011 - each kind checked below
                await ActivityEnvironment().run(activity, call_payload(call))
            failure = Failure()
            failures, payloads = converter.failure_converter, converter.payload_converter
            failures.to_failure(error.value, payloads, failure)
            sent[name], raised[name] = str(failure), error.value
    encoded = base64.b64encode(TOKEN.encode()).decode()
    assert [] == [name for name, text in sent.items() if TOKEN in text or encoded in text]
    leaked = raised["leaks"]
    assert isinstance(leaked, ApplicationError)
    assert not leaked.non_retryable
    assert "RuntimeError" == leaked.type
    assert "bug near [secret TOKEN]" == leaked.message
    assert "KeyError: 'looked up [secret TOKEN]'" in leaked.details[0]
    assert "nothing at [secret TOKEN]" in sent["hides"]
    # With nothing to redact, the exception goes to Temporal as the tool raised it.
    assert isinstance(raised["plain"], LookupError)


@pytest.mark.anyio
async def test_heartbeats_and_results_sent_to_temporal_hold_no_secret(tmp_path: Path) -> None:
    """Progress messages become heartbeat details, which Temporal keeps: redacted, as the
    outcome the activity returns is.
    """
    environment = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    environment.on_heartbeat = lambda *details: beats.append(details)
    async with ToolActivities(lambda: secret_location(tmp_path)) as tools:
        (activity,) = tools.activities
        call = pegboard.ToolCall("reports", "{}", context())
        result = await environment.run(activity, call_payload(call))
    assert ("logged in with [secret TOKEN]",) in beats
    assert "done with [secret TOKEN]" == result["content"][0]["text"]
    assert TOKEN not in json.dumps([result, beats])


@pytest.mark.anyio
async def test_activities_outside_their_location_fail_retryably(tmp_path: Path) -> None:
    """A worker whose ToolActivities is not entered says how to open it, and may retry."""
    tools = ToolActivities(lambda: opened_location(tmp_path))
    with pytest.raises(ApplicationError, match="async with ToolActivities") as error:
        await ActivityEnvironment().run(
            tools.activities[0], call_payload(pegboard.ToolCall("echo", "{}", context()))
        )
    assert not error.value.non_retryable
    with pytest.raises(RuntimeError, match="not open"):
        _ = tools.location


def test_tool_activities_refuses_bad_arguments() -> None:
    """The factory must be callable and the journal a CallJournal."""
    with pytest.raises(TypeError, match=r"lambda: host.location\(root\)"):
        ToolActivities("location")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"pegboard\.CallJournal"):
        ToolActivities(contextlib.nullcontext, journal="journal.db")  # type: ignore[arg-type]


def test_the_workflow_side_imports_nothing_after_pegboard_temporal() -> None:
    """What execute_tool does in a workflow (the payload, loading an outcome, explaining a
    stored form it refuses) imports no module that importing pegboard.temporal did not
    pass through: the sandbox fails a workflow task that imports one late.
    """
    code = """if True:
        import sys
        import pegboard, pegboard.temporal
        from pegboard.temporal._workflow import activity_id
        before = set(sys.modules)
        context = pegboard.ToolContext("s", "a", "m", "c")
        pegboard.temporal.call_payload(pegboard.ToolCall("add", '{"a": 1}', context))
        activity_id("c")
        identity = pegboard.CallIdentity.of(context)
        error = pegboard.ToolError("tool_failure", "no")
        for outcome in (
            pegboard.Completed(None, (pegboard.Text("x"),), name="add", call=identity),
            pegboard.Failed(error, name="add", call=identity),
        ):
            pegboard.load_outcome(pegboard.dump_outcome(outcome))
        try:
            pegboard.load_outcome({"version": 1, "status": "completed"})
        except ValueError:
            pass
        else:
            raise AssertionError("a stored form without content loaded")
        late = {name.partition(".")[0] for name in set(sys.modules) - before}
        print(sorted(late - set(sys.stdlib_module_names)))
    """
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert 0 == shown.returncode, shown.stderr
    assert "[]" == shown.stdout.strip()


def test_import_pegboard_does_not_import_temporalio() -> None:
    """Temporal is loaded by pegboard.temporal alone, never by import pegboard."""
    code = (
        "import sys, pegboard\n"
        "pegboard.ToolCall, pegboard.SQLiteJournal, pegboard.Host\n"
        "print('temporalio' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "False" == result.stdout.strip()


#: A host secret `pegboard worker --secret` reads from its environment.
WORKER_TOKEN = "wk_7Hq2Lm9Zt4Rv1Xc8"


def start_polling(
    command: list[str], environment: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start `pegboard worker` and return once it says it polls."""
    worker = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment)
    assert worker.stderr is not None
    while "polling task queue" not in (line := worker.stderr.readline()):
        assert line, "pegboard worker stopped before polling"
    return worker


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_pegboard_worker_serves_a_locations_tools_under_its_rules(
    temporal_server: str, tmp_path: Path
) -> None:
    """`pegboard worker` runs the builtin read for a workflow; what its rules do not allow
    fails for good (a worker has nobody to ask), naming the rule that would allow it.
    """
    (tmp_path / "allowed.txt").write_text(f"hello from the worker {WORKER_TOKEN}\n")
    (tmp_path / "secret.txt").write_text("no\n")
    queue = f"cli-{uuid.uuid4().hex[:8]}"
    command = [
        str(Path(sys.executable).parent / "pegboard"),
        "worker",
        "--temporal",
        temporal_server,
        "--task-queue",
        queue,
        "-l",
        str(tmp_path),
        "--plugin",
        "builtin",
        "--allow",
        "read:allowed.txt",
        "--journal",
        str(tmp_path / "journal.db"),
        "--secret",
        "WORKER_TOKEN",
    ]
    worker = start_polling(command, {**os.environ, "WORKER_TOKEN": WORKER_TOKEN})
    try:
        async with flows(temporal_server) as (client, flows_queue):
            read = {"name": "read", "call_id": "read-1", "input": '{"path": "allowed.txt"}'}
            (outcome,) = await run_calls(client, flows_queue, queue, [read])
            shown = outcome["content"][0]["text"]
            assert ("hello from the worker [secret WORKER_TOKEN]", False) == (
                shown.splitlines()[0].split("\t")[-1],
                WORKER_TOKEN in json.dumps(outcome),
            )
            secret = {"name": "read", "call_id": "read-2", "input": '{"path": "secret.txt"}'}
            with pytest.raises(WorkflowFailureError) as failure:
                await run_calls(client, flows_queue, queue, [secret])
        cause = failure.value.cause.cause  # type: ignore[union-attr]
        assert isinstance(cause, ApplicationError)
        assert "PermissionRejected" == cause.type
        assert "needs approval" in str(cause)
    finally:
        worker.send_signal(signal.SIGINT)
        assert 130 == worker.wait(timeout=30)
        if worker.stderr is not None:
            worker.stderr.close()


def test_pegboard_worker_refuses_an_address_that_is_not_host_and_port(tmp_path: Path) -> None:
    """A malformed --temporal is one usage line naming the option, exit 2."""
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "pegboard"),
            "worker",
            "--temporal",
            "localhost",
            "--task-queue",
            "q",
            "-l",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert 2 == result.returncode
    assert result.stderr.startswith("pegboard: error: --temporal localhost: not HOST:PORT")
