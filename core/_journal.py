"""The call journal: each call's settled outcome, kept so that a call runs once."""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import attrs
import orjson

from ._durable import dump_outcome, load_outcome
from ._json import thaw
from ._outcome import CallIdentity, Outcome, ToolCall
from ._tool import ToolContext

__all__ = ("CallJournal", "JournalConflict", "JournalEntry", "SQLiteJournal", "journaled")

#: The longest lease a journal may grant: a holder that dies blocks its call
#: for at most this long.
MAX_LEASE = 60.0


class JournalConflict(ValueError):  # noqa: N818 - the name is the contract
    """A call ID came back with another tool or another input than the first time.

    The runner reused a call ID (or edited a call it re-sends): a bug in the
    runner, never resolved by running the call again.
    """


@attrs.frozen(kw_only=True)
class JournalEntry:
    """What `CallJournal.claim` found for one call.

    Exactly one of three: ``outcome`` is the durable form of the call's
    settled outcome; or ``token`` is set, and the caller now holds the call and
    runs its attempt number ``attempt``; or neither, and another live holder is
    running it (ask again shortly).
    """

    attempt: int = 0
    outcome: Mapping[str, Any] | None = None
    token: str | None = None


@runtime_checkable
class CallJournal(Protocol):
    """Where the calls of a request are claimed, settled and read back.

    A call is keyed by ``(session_id, call_id)`` and fingerprinted by its tool
    name and raw input. Pegboard drives the protocol; a journal only stores:
    `claim` before running, `renew` every ``lease / 3`` seconds while the tool
    runs, then `settle` with the outcome's durable form (`pegboard.dump_outcome`),
    or `release` when the attempt ended without an outcome (cancellation, a
    defect). A claim whose holder stops renewing lapses after ``lease`` seconds
    (at most 60), and the call can then be claimed again.
    """

    #: Seconds a claim lasts without renewal.
    lease: float

    async def claim(self, session_id: str, call_id: str, fingerprint: str) -> JournalEntry:
        """Claim the call, or report its settled outcome or that another holds it.

        Raises `JournalConflict` when the key was first claimed with another
        fingerprint.
        """
        ...

    async def renew(self, session_id: str, call_id: str, token: str) -> None:
        """Extend the holder's claim by another ``lease`` seconds."""
        ...

    async def settle(
        self, session_id: str, call_id: str, token: str, outcome: Mapping[str, Any]
    ) -> None:
        """Store the call's outcome (its durable form); the first outcome stored stays."""
        ...

    async def release(self, session_id: str, call_id: str, token: str) -> None:
        """Give up the claim without an outcome, so the call can run again at once."""
        ...


def check_journal(journal: object, where: str) -> None:
    """Raise unless ``journal`` is a `CallJournal` whose lease is more than 0 and at most
    `MAX_LEASE` seconds: a longer one blocks a dead holder's calls too long, and a lease
    of 0 would renew without pause while its tool runs.
    """
    if not isinstance(journal, CallJournal):
        raise TypeError(
            f"{where}(journal=...) takes a pegboard.CallJournal such as "
            f"pegboard.SQLiteJournal(path), got {type(journal).__name__}"
        )
    lease = journal.lease
    if isinstance(lease, bool) or not isinstance(lease, int | float) or not 0 < lease <= MAX_LEASE:
        raise ValueError(
            f"{where}(journal=...): {type(journal).__name__}.lease is {lease!r}; a lease is "
            f"more than 0 and at most {MAX_LEASE:g} seconds"
        )


def fingerprint(call: ToolCall) -> str:
    """The tool name and the canonical JSON (keys sorted, no spaces) of the raw input, hashed."""
    raw = call.input
    value: Any
    if isinstance(raw, str | bytes):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            try:
                value = json.loads(raw)
            except ValueError:
                # Not JSON (the call will fail as invalid input): the text itself.
                text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
                value = {"not JSON": text}
    else:
        value = thaw(raw)
    try:
        canonical = orjson.dumps([call.name, value], option=orjson.OPT_SORT_KEYS)
        if b"null" in canonical and _not_finite(value):
            # orjson writes NaN and infinities as null: ``{"a": NaN}`` is not ``{"a": null}``.
            raise TypeError("not finite")
    except TypeError:  # integers beyond 64 bits, NaN, or a mapping that is not JSON
        canonical = json.dumps(
            [call.name, value],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            default=repr,
        ).encode("utf-8", "surrogatepass")
    return hashlib.sha256(canonical).hexdigest()


def _not_finite(value: Any) -> bool:
    """Whether ``value`` (plain JSON) holds NaN or an infinity anywhere."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_not_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_not_finite(item) for item in value)
    return False


async def journaled(
    journal: CallJournal, call: ToolCall, execute: Callable[[ToolCall], Awaitable[Outcome]]
) -> Outcome:
    """Run ``call`` through ``execute`` at most once as far as ``journal`` knows.

    A settled call returns its stored outcome; a call another holder is
    running is waited for; otherwise this process runs it, renewing its claim,
    and settles the outcome, or releases the claim when no outcome came.
    """
    context = call.context
    session_id, call_id = context.session_id, context.call_id
    mark = fingerprint(call)
    delay = 0.002
    while True:
        # Shielded: a claim made as the caller is cancelled is still known, and released.
        with anyio.CancelScope(shield=True):
            entry = await journal.claim(session_id, call_id, mark)
        if entry.outcome is not None:
            return _as_sent(load_outcome(entry.outcome), context)
        if entry.token is not None:
            break
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.1)
    token = entry.token
    settled = False
    try:
        if entry.attempt > context.attempt:
            context = attrs.evolve(context, attempt=entry.attempt)
            call = ToolCall(call.name, call.input, context)
        outcome = await _holding(journal, session_id, call_id, token, execute, call)
        await journal.settle(session_id, call_id, token, dump_outcome(outcome))
        settled = True
    finally:
        if not settled:
            # Shielded: a cancelled call still frees its key before it propagates.
            with anyio.CancelScope(shield=True):
                await journal.release(session_id, call_id, token)
    return outcome


def _as_sent(outcome: Outcome, context: ToolContext) -> Outcome:
    """The stored outcome, carrying the IDs of the call as the runner sent it this time.

    The key is the session and call ID; a runner that re-sends a call under another
    message ID or agent gets its own IDs back (durable identity), the rest as stored.
    """
    identity = CallIdentity.of(context)
    return outcome if outcome.call == identity else attrs.evolve(outcome, call=identity)


async def _holding(
    journal: CallJournal,
    session_id: str,
    call_id: str,
    token: str,
    execute: Callable[[ToolCall], Awaitable[Outcome]],
    call: ToolCall,
) -> Outcome:
    """``execute(call)`` while renewing the claim every third of the lease.

    A renewal the journal cannot make stops the call: its claim would lapse while
    the tool still runs, and another process could run it too. The journal's own
    error is raised then, as it raised it.
    """
    result: list[Outcome] = []
    defects: list[Exception] = []

    async def renewing(group: anyio.abc.TaskGroup) -> None:
        while True:
            await anyio.sleep(journal.lease / 3)
            try:
                await journal.renew(session_id, call_id, token)
            except Exception as error:  # noqa: BLE001 - raised below, in place of the call
                defects.append(error)
                group.cancel_scope.cancel()
                return

    async with anyio.create_task_group() as group:
        group.start_soon(renewing, group)
        try:
            result.append(await execute(call))
        except Exception as defect:  # noqa: BLE001 - re-raised unchanged below
            defects.append(defect)
        group.cancel_scope.cancel()
    # Raised outside the task group, so a defect propagates as execute() raised it.
    if defects:
        raise defects[0]
    return result[0]


def _machine() -> str:
    """Where this process's ID means something: the host name and, on Linux, the process
    ID namespace. Containers that share a host name (``--network host``) and a journal
    file each have their own process IDs: a holder in another never looks gone.
    """
    name = socket.gethostname()
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return name
    return f"{name} {namespace}"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pegboard_calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    holder TEXT,
    host TEXT,
    pid INTEGER,
    expires REAL,
    outcome TEXT,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID
"""


class SQLiteJournal:
    """A `CallJournal` in one SQLite file, for the processes of one machine.

    WAL mode, one short write transaction per claim, renewal and settlement,
    so several processes can share the file. A claim lasts ``lease`` seconds
    (at most 60) and is renewed while its tool runs; a holder that died is
    taken over as soon as its process is seen gone (same host and process ID
    namespace), otherwise once its lease lapses. Settled calls stay until `forget` removes them.

    Commits survive the process that made them (``kill -9``) but are not
    flushed to disk one by one (``synchronous=NORMAL``): after a power loss the
    last calls may be forgotten, and run again with the same
    ``idempotency_key``. Put the file on a local disk: SQLite's locks are not
    reliable on network file systems.
    """

    def __init__(self, path: str | os.PathLike[str], *, lease: float = 30.0) -> None:
        if isinstance(lease, bool) or not isinstance(lease, int | float):
            raise TypeError(f"SQLiteJournal lease is a number of seconds, got {lease!r}")
        if not 0 < lease <= MAX_LEASE:
            raise ValueError(
                f"SQLiteJournal lease is more than 0 and at most {MAX_LEASE:g} seconds, "
                f"got {lease!r}: a holder that dies blocks its calls this long"
            )
        self.path = Path(path)
        self.lease = float(lease)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0
        self._host = _machine()

    def __repr__(self) -> str:
        return f"<SQLiteJournal {str(self.path)!r} lease={self.lease:g}s>"

    def _db(self) -> sqlite3.Connection:
        # One connection per process: a forked child opens its own.
        if self._connection is None or self._pid != os.getpid():
            try:
                connection = sqlite3.connect(
                    self.path, timeout=30, isolation_level=None, check_same_thread=False
                )
            except sqlite3.OperationalError as error:
                raise OSError(
                    f"cannot open the call journal {str(self.path)!r}: {error}"
                ) from error
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def _write(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

    def _alive(self, host: str | None, pid: int | None) -> bool:
        """Whether a holder may still run: only a process of this host can be seen gone."""
        if host != self._host or pid is None:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process: alive
            return True
        # A killed process its parent has not reaped yet still answers kill(0):
        # on Linux its state says it is gone.
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[:1]
        except OSError:
            return True
        return state not in ([b"Z"], [b"X"])

    def _claim(self, session_id: str, call_id: str, mark: str) -> JournalEntry:
        def work(db: sqlite3.Connection) -> JournalEntry:
            row = db.execute(
                "SELECT fingerprint, attempts, holder, host, pid, expires, outcome "
                "FROM pegboard_calls WHERE session_id = ? AND call_id = ?",
                (session_id, call_id),
            ).fetchone()
            now = time.time()
            token = uuid.uuid4().hex
            if row is None:
                db.execute(
                    "INSERT INTO pegboard_calls VALUES (?, ?, ?, 1, ?, ?, ?, ?, NULL)",
                    (session_id, call_id, mark, token, self._host, os.getpid(), now + self.lease),
                )
                return JournalEntry(attempt=1, token=token)
            stored, attempts, holder, host, pid, expires, outcome = row
            if stored != mark:
                raise JournalConflict(
                    f"call {call_id!r} of session {session_id!r} was journaled with another "
                    "tool or input: a runner reuses call IDs for different calls, or changed "
                    "a call it re-sent; give each call its own ID"
                )
            if outcome is not None:
                return JournalEntry(attempt=attempts, outcome=json.loads(outcome))
            if holder is not None and expires > now and self._alive(host, pid):
                return JournalEntry(attempt=attempts)
            db.execute(
                "UPDATE pegboard_calls SET attempts = ?, holder = ?, host = ?, pid = ?, "
                "expires = ? WHERE session_id = ? AND call_id = ?",
                (
                    attempts + 1,
                    token,
                    self._host,
                    os.getpid(),
                    now + self.lease,
                    session_id,
                    call_id,
                ),
            )
            return JournalEntry(attempt=attempts + 1, token=token)

        return self._write(work)  # type: ignore[no-any-return]

    async def claim(self, session_id: str, call_id: str, fingerprint: str) -> JournalEntry:
        """See `CallJournal.claim`."""
        settled = self._settled(session_id, call_id, fingerprint)
        if settled is not None:
            return settled
        return await anyio.to_thread.run_sync(self._claim, session_id, call_id, fingerprint)

    def _settled(self, session_id: str, call_id: str, mark: str) -> JournalEntry | None:
        """A settled call, read without leaving the event loop; None to claim it in a thread.

        A read in WAL mode never waits for a writer, so it is done here when the
        connection is free; a replayed call then costs no thread hop.
        """
        if self._connection is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._pid != os.getpid():
                return None
            row = self._connection.execute(
                "SELECT fingerprint, attempts, outcome FROM pegboard_calls "
                "WHERE session_id = ? AND call_id = ?",
                (session_id, call_id),
            ).fetchone()
        finally:
            self._lock.release()
        if row is None or row[2] is None or row[0] != mark:
            return None  # the claim in a thread decides, and raises a conflict
        return JournalEntry(attempt=row[1], outcome=json.loads(row[2]))

    async def renew(self, session_id: str, call_id: str, token: str) -> None:
        """See `CallJournal.renew`."""
        await anyio.to_thread.run_sync(
            self._update,
            "UPDATE pegboard_calls SET expires = ? "
            "WHERE session_id = ? AND call_id = ? AND holder = ? AND outcome IS NULL",
            (time.time() + self.lease, session_id, call_id, token),
        )

    async def settle(
        self, session_id: str, call_id: str, token: str, outcome: Mapping[str, Any]
    ) -> None:
        """See `CallJournal.settle`."""
        text = json.dumps(outcome, ensure_ascii=False, separators=(",", ":"))
        await anyio.to_thread.run_sync(
            self._update,
            "UPDATE pegboard_calls SET outcome = ?, holder = NULL, expires = NULL "
            "WHERE session_id = ? AND call_id = ? AND outcome IS NULL",
            (text, session_id, call_id),
        )

    async def release(self, session_id: str, call_id: str, token: str) -> None:
        """See `CallJournal.release`."""
        await anyio.to_thread.run_sync(
            self._update,
            "UPDATE pegboard_calls SET holder = NULL, expires = NULL "
            "WHERE session_id = ? AND call_id = ? AND holder = ?",
            (session_id, call_id, token),
        )

    def _update(self, statement: str, parameters: tuple[Any, ...]) -> None:
        self._write(lambda db: db.execute(statement, parameters))

    def forget(self, session_id: str) -> int:
        """Remove the settled calls of ``session_id``; the number removed.

        Calls still running keep their claims. A forgotten call runs again if
        it is sent again.
        """
        cursor = self._write(
            lambda db: db.execute(
                "DELETE FROM pegboard_calls WHERE session_id = ? AND outcome IS NOT NULL",
                (session_id,),
            )
        )
        return int(cursor.rowcount)

    def close(self) -> None:
        """Close this process's connection (the next use opens it again)."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __enter__(self) -> SQLiteJournal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
