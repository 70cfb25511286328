"""The call journal: settled calls never run again, crashed ones run again, once."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]
CHILD = Path(__file__).resolve().parent / "journal_child.py"


class Counted:
    """Tools that count their executions, by call ID, with the attempts they saw."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, int, str]] = []
        self.gate = anyio.Event()
        self.gate.set()

    def tools(self) -> dict[str, pegboard.Tool]:
        async def add(value: dict[str, Any], context: pegboard.ToolContext) -> str:
            self.runs.append((context.call_id, context.attempt, context.idempotency_key))
            await self.gate.wait()
            return str(value["a"] + value["b"])

        async def refuse(value: dict[str, Any], context: pegboard.ToolContext) -> str:
            self.runs.append((context.call_id, context.attempt, context.idempotency_key))
            raise pegboard.ToolFailure("no such account", metadata={"code": 7})

        async def broken(value: dict[str, Any], context: pegboard.ToolContext) -> str:
            self.runs.append((context.call_id, context.attempt, context.idempotency_key))
            raise LookupError("bug in the tool")

        schema = {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        }
        return {
            "add": pegboard.tool(description="Add.", input=schema, execute=add),
            "refuse": pegboard.tool(description="Refuse.", input=schema, execute=refuse),
            "broken": pegboard.tool(description="Break.", input=schema, execute=broken),
        }


@pytest.fixture
def counted(location: pegboard.Location) -> Counted:
    made = Counted()
    location.tools.register(made.tools())
    return made


@pytest.fixture
def journal(tmp_path: Path) -> pegboard.SQLiteJournal:
    with pegboard.SQLiteJournal(tmp_path / "journal.db") as opened:
        yield opened  # type: ignore[misc]


def add(context: pegboard.ToolContext, a: int = 1, b: int = 2) -> pegboard.ToolCall:
    return pegboard.ToolCall("add", json.dumps({"a": a, "b": b}), context)


async def test_settled_call_returns_its_outcome_without_running(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """A call sent again, to a new request over the same journal, is not run again."""
    first = await location.prepare(journal=journal).execute(add(context("call-1")))
    again = await location.prepare(journal=journal).execute(add(context("call-1")))
    third = await location.prepare(journal=journal).execute(add(context("call-1")))
    assert [("call-1", 1)] == [(call_id, attempt) for call_id, attempt, _ in counted.runs]
    assert pegboard.dump_outcome(first) == pegboard.dump_outcome(again)
    assert pegboard.dump_outcome(first) == pegboard.dump_outcome(third)
    assert isinstance(again, pegboard.Completed)
    assert "3" == again.content[0].text  # type: ignore[union-attr]


async def test_a_failed_outcome_is_settled_too(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """A tool failure is the call's outcome: replayed with its metadata, never re-run."""
    call = pegboard.ToolCall("refuse", "{}", context("call-9"))
    first = await location.prepare(journal=journal).execute(call)
    again = await location.prepare(journal=journal).execute(call)
    assert isinstance(again, pegboard.Failed)
    assert {"code": 7} == again.error.metadata
    assert pegboard.dump_outcome(first) == pegboard.dump_outcome(again)
    assert 1 == len(counted.runs)


async def test_without_a_journal_every_call_runs(
    location: pegboard.Location, counted: Counted, context: Context
) -> None:
    """The journal is opt-in: a request without one runs a repeated call again."""
    request = location.prepare()
    await request.execute(add(context("call-1")))
    await request.execute(add(context("call-1")))
    assert 2 == len(counted.runs)


async def test_a_changed_input_or_tool_under_one_call_id_raises_a_conflict(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """Another input or another tool for a journaled call ID is a runner bug, never re-run."""
    request = location.prepare(journal=journal)
    await request.execute(add(context("call-1"), a=1))
    with pytest.raises(pegboard.JournalConflict, match=r"call 'call-1' of session 'session-1'"):
        await request.execute(add(context("call-1"), a=2))
    with pytest.raises(ValueError, match="give each call its own ID"):
        await request.execute(pegboard.ToolCall("refuse", '{"a": 1, "b": 2}', context("call-1")))
    assert 1 == len(counted.runs)


async def test_the_fingerprint_is_canonical_json(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """The same input re-sent with other spacing, key order or as a mapping replays."""
    request = location.prepare(journal=journal)
    await request.execute(pegboard.ToolCall("add", '{"a": 1, "b": 2}', context("call-1")))
    again = [
        pegboard.ToolCall("add", b'{"b":2,"a":1}', context("call-1")),
        pegboard.ToolCall("add", {"b": 2, "a": 1}, context("call-1")),
    ]
    for call in again:
        assert isinstance(await request.execute(call), pegboard.Completed)
    assert 1 == len(counted.runs)


@pytest.mark.parametrize("special", ["NaN", "Infinity", "-Infinity"])
async def test_a_number_json_cannot_hold_is_not_null_to_the_fingerprint(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
    special: str,
) -> None:
    """Python's JSON reads NaN and the infinities, which orjson writes as null: a call
    re-sent with null in their place is another call, a conflict, never a replay.
    """
    fingerprint = pegboard._journal.fingerprint  # type: ignore[attr-defined]
    odd = pegboard.ToolCall("add", f'{{"a": {special}, "b": 2}}', context("call-1"))
    null = pegboard.ToolCall("add", '{"a": null, "b": 2}', context("call-1"))
    assert fingerprint(odd) != fingerprint(null)
    as_mapping = pegboard.ToolCall("add", {"b": 2, "a": float(special)}, context("call-1"))
    assert fingerprint(odd) == fingerprint(as_mapping)
    # A null alone keeps the fingerprint it always had (journals already written hold it).
    canonical = b'["add",{"a":null,"b":2}]'
    assert hashlib.sha256(canonical).hexdigest() == fingerprint(null)
    request = location.prepare(journal=journal)
    await request.execute(null)
    with pytest.raises(pegboard.JournalConflict, match="call 'call-1'"):
        await request.execute(odd)
    assert 0 == len(counted.runs)  # null is no integer: invalid input, settled as Failed


async def test_calls_are_keyed_by_session_and_call_id(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """The same call ID in another session is another call."""
    request = location.prepare(journal=journal)
    await request.execute(add(context("call-1")))
    await request.execute(add(context("call-1", session_id="session-2")))
    keys = {key for _, _, key in counted.runs}
    assert 2 == len(counted.runs)
    assert 2 == len(keys)


async def test_a_cancelled_call_settles_nothing_and_runs_again_at_once(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """Cancellation releases the claim: the call runs again straight away, as attempt 2."""
    counted.gate = anyio.Event()
    request = location.prepare(journal=journal)
    with anyio.move_on_after(0.2) as scope:
        await request.execute(add(context("call-1")))
    assert scope.cancelled_caught
    counted.gate.set()
    with anyio.fail_after(journal.lease / 2):
        outcome = await request.execute(add(context("call-1")))
    assert isinstance(outcome, pegboard.Completed)
    assert [1, 2] == [attempt for _, attempt, _ in counted.runs]
    assert 1 == len({key for _, _, key in counted.runs})


async def test_a_defect_settles_nothing_and_propagates_unchanged(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """A tool that raises is not an outcome: the error propagates and the call runs again."""
    request = location.prepare(journal=journal)
    call = pegboard.ToolCall("broken", "{}", context("call-1"))
    for _ in range(2):
        with pytest.raises(LookupError, match="bug in the tool"):
            with anyio.fail_after(journal.lease / 2):
                await request.execute(call)
    assert [1, 2] == [attempt for _, attempt, _ in counted.runs]


async def test_one_call_sent_twice_at_once_runs_once(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """Two tasks executing the same call: one runs it, the other waits for its outcome."""
    counted.gate = anyio.Event()
    request = location.prepare(journal=journal)
    outcomes: list[pegboard.Outcome] = []

    async def execute() -> None:
        outcomes.append(await request.execute(add(context("call-1"))))

    async with anyio.create_task_group() as group:
        group.start_soon(execute)
        group.start_soon(execute)
        await anyio.sleep(0.1)
        counted.gate.set()
    assert 1 == len(counted.runs)
    assert pegboard.dump_outcome(outcomes[0]) == pegboard.dump_outcome(outcomes[1])


async def test_a_claim_is_renewed_while_its_tool_runs(
    location: pegboard.Location, counted: Counted, tmp_path: Path, context: Context
) -> None:
    """A call running longer than the lease keeps its claim: a second sender waits."""
    counted.gate = anyio.Event()
    journal = pegboard.SQLiteJournal(tmp_path / "short.db", lease=0.15)
    request = location.prepare(journal=journal)
    outcomes: list[pegboard.Outcome] = []

    async def execute() -> None:
        outcomes.append(await request.execute(add(context("call-1"))))

    async with anyio.create_task_group() as group:
        group.start_soon(execute)
        await anyio.sleep(0.05)
        group.start_soon(execute)
        await anyio.sleep(0.6)  # four leases
        counted.gate.set()
    journal.close()
    assert 1 == len(counted.runs)
    assert 2 == len(outcomes)


class StoreDown(pegboard.SQLiteJournal):
    """A journal whose store stops taking renewals once the call has begun."""

    async def renew(self, session_id: str, call_id: str, token: str) -> None:
        raise OSError("the journal's disk is gone")


async def test_a_renewal_the_journal_cannot_make_stops_the_call_with_its_error(
    location: pegboard.Location, counted: Counted, tmp_path: Path, context: Context
) -> None:
    """A claim that cannot be renewed would lapse while its tool runs, and another process
    could run the call too: the call stops, the host gets the journal's own error (not a
    group of it), and the claim is released, so the call runs again at once."""
    counted.gate = anyio.Event()  # the tool runs until cancelled
    journal = StoreDown(tmp_path / "down.db", lease=0.15)
    with anyio.fail_after(10), pytest.raises(OSError, match="the journal's disk is gone"):
        await location.prepare(journal=journal).execute(add(context("call-1")))
    counted.gate.set()
    healthy = pegboard.SQLiteJournal(tmp_path / "down.db", lease=0.15)
    with anyio.fail_after(10):
        again = await location.prepare(journal=healthy).execute(add(context("call-1")))
    journal.close()
    healthy.close()
    assert isinstance(again, pegboard.Completed)
    assert [("call-1", 1), ("call-1", 2)] == [(call, attempt) for call, attempt, _ in counted.runs]


async def test_a_lapsed_lease_of_another_host_is_taken_over(
    location: pegboard.Location, counted: Counted, tmp_path: Path, context: Context
) -> None:
    """A claim from another machine that stopped renewing is taken once its lease ends."""
    path = tmp_path / "journal.db"
    journal = pegboard.SQLiteJournal(path, lease=0.3)
    request = location.prepare(journal=journal)
    fingerprint = pegboard._journal.fingerprint(add(context("call-1")))  # type: ignore[attr-defined]
    held = await journal.claim("session-1", "call-1", fingerprint)
    assert held.token is not None
    with sqlite3.connect(path) as db:
        db.execute("UPDATE pegboard_calls SET host = 'a-host-that-died'")
    db.close()
    start = time.monotonic()
    outcome = await request.execute(add(context("call-1")))
    waited = time.monotonic() - start
    journal.close()
    assert isinstance(outcome, pegboard.Completed)
    assert [2] == [attempt for _, attempt, _ in counted.runs]
    assert 0.2 < waited < 2.0


async def test_a_holder_in_another_pid_namespace_is_never_seen_gone(
    location: pegboard.Location, counted: Counted, tmp_path: Path, context: Context
) -> None:
    """Another container with this host name has its own process IDs: its holder's ID not
    running here says nothing, so the claim is waited out, not taken over at once.
    """
    path = tmp_path / "journal.db"
    journal = pegboard.SQLiteJournal(path, lease=0.5)
    request = location.prepare(journal=journal)
    fingerprint = pegboard._journal.fingerprint(add(context("call-1")))  # type: ignore[attr-defined]
    held = await journal.claim("session-1", "call-1", fingerprint)
    assert held.token is not None
    async with await anyio.open_process([sys.executable, "-c", "pass"]) as gone:
        await gone.wait()  # a process ID that runs nothing here
    with sqlite3.connect(path) as db:
        db.execute("UPDATE pegboard_calls SET host = ?, pid = ?", (socket.gethostname(), gone.pid))
    db.close()
    start = time.monotonic()
    outcome = await request.execute(add(context("call-1")))
    waited = time.monotonic() - start
    journal.close()
    assert isinstance(outcome, pegboard.Completed)
    assert [2] == [attempt for _, attempt, _ in counted.runs]
    assert waited > 0.4, "taken over before the lease lapsed"


def test_the_lease_is_at_most_sixty_seconds(tmp_path: Path) -> None:
    """A holder that dies never blocks its call for more than a minute."""
    with pytest.raises(ValueError, match="at most 60 seconds"):
        pegboard.SQLiteJournal(tmp_path / "j.db", lease=61)
    with pytest.raises(ValueError, match="more than 0"):
        pegboard.SQLiteJournal(tmp_path / "j.db", lease=0)
    with pytest.raises(TypeError, match="number of seconds"):
        pegboard.SQLiteJournal(tmp_path / "j.db", lease="30")  # type: ignore[arg-type]
    assert 30.0 == pegboard.SQLiteJournal(tmp_path / "j.db").lease


async def test_prepare_refuses_what_is_not_a_journal(location: pegboard.Location) -> None:
    """journal= takes a CallJournal; anything else is one clear TypeError."""
    with pytest.raises(TypeError, match=r"pegboard.SQLiteJournal\(path\), got str"):
        location.prepare(journal="journal.db")  # type: ignore[arg-type]


class Leased:
    """A journal of the host's own making, with the lease it says it grants."""

    def __init__(self, lease: object) -> None:
        self.lease = lease

    async def claim(self, session_id: str, call_id: str, mark: str) -> pegboard.JournalEntry:
        return pegboard.JournalEntry(attempt=1, token="token")

    async def renew(self, session_id: str, call_id: str, token: str) -> None:
        raise AssertionError("never reached")

    async def settle(self, session_id: str, call_id: str, token: str, outcome: Any) -> None:
        raise AssertionError("never reached")

    async def release(self, session_id: str, call_id: str, token: str) -> None:
        raise AssertionError("never reached")


@pytest.mark.parametrize("lease", [0, -1, 61, 3600.0, None, "30", True])
async def test_a_journal_of_the_hosts_own_must_lease_at_most_sixty_seconds(
    location: pegboard.Location, lease: object
) -> None:
    """The 60-second bound holds for every CallJournal, not only SQLiteJournal: a longer
    lease blocks a dead holder's calls too long, and a lease of 0 would renew without pause.
    """
    journal = Leased(lease)
    assert isinstance(journal, pegboard.CallJournal)
    with pytest.raises(ValueError, match=f"Leased.lease is {lease!r}; a lease is more than 0"):
        location.prepare(journal=journal)  # type: ignore[arg-type]
    from pegboard.temporal import ToolActivities

    with pytest.raises(ValueError, match=r"ToolActivities\(journal=\.\.\.\): Leased.lease"):
        ToolActivities(contextlib.nullcontext, journal=journal)  # type: ignore[arg-type]
    assert location.prepare(journal=Leased(60)) is not None  # type: ignore[arg-type]


async def test_forget_removes_a_sessions_settled_calls(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """A forgotten call runs again; other sessions' calls stay."""
    request = location.prepare(journal=journal)
    await request.execute(add(context("call-1")))
    await request.execute(add(context("call-1", session_id="other")))
    assert 1 == journal.forget("session-1")
    await request.execute(add(context("call-1")))
    await request.execute(add(context("call-1", session_id="other")))
    assert 3 == len(counted.runs)


async def test_unopenable_journal_is_one_clear_error(
    location: pegboard.Location, counted: Counted, tmp_path: Path, context: Context
) -> None:
    """A journal in a folder that does not exist says which file it could not open."""
    journal = pegboard.SQLiteJournal(tmp_path / "missing" / "journal.db")
    with pytest.raises(OSError, match=r"cannot open the call journal '.*missing/journal.db'"):
        await location.prepare(journal=journal).execute(add(context("call-1")))
    assert [] == counted.runs


def test_idempotency_key_depends_on_session_and_call_only() -> None:
    """Same session and call ID: same key, whatever the agent, message or attempt."""
    key = pegboard.ToolContext("s", "a", "m", "c").idempotency_key
    assert key == pegboard.ToolContext("s", "other", "other", "c", attempt=3).idempotency_key
    assert key != pegboard.ToolContext("s", "a", "m", "d").idempotency_key
    assert key != pegboard.ToolContext("t", "a", "m", "c").idempotency_key
    # The parts cannot slide into each other.
    assert (
        pegboard.ToolContext("ab", "a", "m", "c").idempotency_key
        != pegboard.ToolContext("a", "a", "m", "bc").idempotency_key
    )
    assert 36 == len(key)
    # Fixed for ever: a key handed to an external API must not change between versions.
    assert (
        "12726a5f-8d8d-568f-9c99-93b084c7220d"
        == pegboard.ToolContext("s", "a", "m", "c").idempotency_key
    )


def test_attempt_is_a_positive_integer() -> None:
    """attempt starts at 1; zero, negatives, booleans and floats are refused."""
    assert 1 == pegboard.ToolContext("s", "a", "m", "c").attempt
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=r"ToolContext\.attempt is a positive integer"):
            pegboard.ToolContext("s", "a", "m", "c", attempt=bad)  # type: ignore[arg-type]


def runs(path: Path) -> list[tuple[str, str, int, int]]:
    """The executions the tool recorded (none while the table is being made)."""
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=30) as db:
        try:
            found = db.execute("SELECT call_id, key, attempt, pid FROM runs").fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" not in str(error):
                raise
            found = []
    db.close()
    return found


def child(
    tmp_path: Path, calls: int, *options: str, backend: str = "asyncio"
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(CHILD),
            str(tmp_path / "journal.db"),
            str(tmp_path / "runs.db"),
            str(calls),
            "--backend",
            backend,
            *options,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_process_killed_mid_call_runs_it_again_as_attempt_2(tmp_path: Path, backend: str) -> None:
    """kill -9 while the tool runs: the next process runs the call again, same key, attempt 2.

    The journal's default lease (30 s) is not waited out: the dead holder was on
    this machine, so its claim is taken over as soon as its process is gone.
    """
    doomed = child(tmp_path, 1, "--hang", backend=backend)
    deadline = time.monotonic() + 30
    try:
        while not runs(tmp_path / "runs.db"):
            assert time.monotonic() < deadline, doomed.stderr.read() if doomed.stderr else ""
            time.sleep(0.02)
    finally:
        # Killed in any case: a child that hangs must not outlive a failed test.
        os.kill(doomed.pid, signal.SIGKILL)
    # Not reaped yet, as a crashed worker whose parent is busy: a zombie is gone too.
    while Path(f"/proc/{doomed.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z":
        time.sleep(0.01)
    start = time.monotonic()
    survivor = child(tmp_path, 1, backend=backend)
    out, err = survivor.communicate(timeout=60)
    assert 0 == survivor.returncode, err
    assert time.monotonic() - start < 15
    (first, second) = runs(tmp_path / "runs.db")
    assert (first[0], first[1], first[2]) == ("call-0", first[1], 1)
    assert (second[0], second[1], second[2]) == ("call-0", first[1], 2)
    expected = pegboard.ToolContext("session-1", "agent", "message-1", "call-0")
    assert expected.idempotency_key == first[1]
    (outcome,) = json.loads(out)
    assert "completed" == outcome["status"]
    # Settled now: a third process replays it without running.
    third = child(tmp_path, 1, backend=backend)
    assert 0 == third.wait(timeout=60)
    assert 2 == len(runs(tmp_path / "runs.db"))
    assert third.stdout is not None
    assert [outcome] == json.loads(third.stdout.read())
    doomed.wait()
    for process in (doomed, survivor, third):
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_two_processes_racing_on_200_calls_run_each_once(tmp_path: Path) -> None:
    """Two processes, one on asyncio and one on trio, execute the same 200 calls at once:
    each tool runs exactly once.
    """
    start = tmp_path / "go"
    # One on each backend: the journal's claims do not depend on the event loop.
    racers = [
        child(tmp_path, 200, "--start", str(start), backend=backend)
        for backend in ("asyncio", "trio")
    ]
    time.sleep(0.5)  # both started and waiting
    start.touch()
    results = [racer.communicate(timeout=120) for racer in racers]
    for racer, (_, err) in zip(racers, results, strict=True):
        assert 0 == racer.returncode, err
    found = runs(tmp_path / "runs.db")
    assert 200 == len(found)
    assert 200 == len({call_id for call_id, _, _, _ in found})
    assert {1} == {attempt for _, _, attempt, _ in found}
    first, second = (json.loads(out) for out, _ in results)
    assert first == second
    assert [str(index + 1) for index in range(200)] == [o["content"][0]["text"] for o in first]


async def test_law_durable_identity_holds_for_replayed_calls(
    location: pegboard.Location,
    counted: Counted,
    journal: pegboard.SQLiteJournal,
    context: Context,
) -> None:
    """A call re-sent under another message ID is replayed carrying the IDs sent now."""
    request = location.prepare(journal=journal)
    first = await request.execute(add(context("call-1")))
    again = await request.execute(add(context("call-1", message_id="message-2", agent="b")))
    assert 1 == len(counted.runs)
    assert again.call == pegboard.CallIdentity(
        session_id="session-1", agent="b", message_id="message-2", call_id="call-1"
    )
    assert first.content == again.content
