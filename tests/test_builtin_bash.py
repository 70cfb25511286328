"""The bash tool: process groups, timeouts, cancellation, bounded and spooled output."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from builtin_calls import call, failure, metadata, opened, running, text

import pegboard
from pegboard.plugins_builtin._capture import Capture

pytestmark = pytest.mark.anyio

MiB = 1 << 20


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> AsyncIterator[pegboard.Location]:
    async with opened(host, workspace, storage_dir) as opened_location:
        yield opened_location


def context(progress: list[pegboard.Progress] | None = None) -> pegboard.ToolContext:
    async def report(update: pegboard.Progress) -> None:
        if progress is not None:
            progress.append(update)

    return pegboard.ToolContext(
        session_id="s", agent="a", message_id="m", call_id="c", progress=report
    )


async def pids_in(path: Path, count: int) -> list[int]:
    """Wait for a command to write ``count`` process IDs to ``path``."""
    with anyio.fail_after(10):
        while True:
            if path.exists():
                found = path.read_text().split()
                if len(found) >= count:
                    return [int(pid) for pid in found]
            await anyio.sleep(0.02)


async def gone(*pids: int) -> bool:
    """Whether every process in ``pids`` has ended (allowing a moment for the kernel)."""
    with anyio.move_on_after(2):
        while any(map(running, pids)):  # noqa: ASYNC110 - nothing to wait on but the pids
            await anyio.sleep(0.02)
    return not any(map(running, pids))


async def test_runs_in_the_root_with_stderr_and_the_exit_code(
    location: pegboard.Location, workspace: Path
) -> None:
    """The command runs in the Location root; stdout and stderr interleave; the code is told."""
    outcome = await call(location, "bash", command="pwd; echo oops >&2; exit 3")
    assert f"{workspace}\noops\n\n(exit code 3)" == text(outcome)
    data = metadata(outcome)
    assert (3, None, False, 0) == (
        data["exit_code"],
        data["signal"],
        data["timed_out"],
        data["lost_bytes"],
    )
    assert "(no output)\n\n(exit code 0)" == text(await call(location, "bash", command="true"))


async def test_stdin_is_closed(location: pegboard.Location) -> None:
    """A command that reads stdin gets end-of-file at once instead of hanging."""
    assert "read nothing" in text(await call(location, "bash", command="cat; echo read nothing"))


async def test_workdir_is_a_folder_inside_the_location(
    location: pegboard.Location, workspace: Path
) -> None:
    """workdir moves the command into a folder; outside or not a folder is refused."""
    (workspace / "src").mkdir()
    (workspace / "file.txt").write_text("")
    assert text(await call(location, "bash", command="pwd", workdir="src")).startswith(
        f"{workspace / 'src'}\n"
    )
    assert "outside the Location" in failure(
        await call(location, "bash", command="pwd", workdir="..")
    )
    assert "not a directory" in failure(
        await call(location, "bash", command="pwd", workdir="file.txt")
    )
    assert "does not exist" in failure(await call(location, "bash", command="pwd", workdir="no"))


async def test_bad_commands_and_timeouts_are_refused(location: pegboard.Location) -> None:
    assert "the command is empty" in failure(await call(location, "bash", command="  "))
    for timeout in (0, -1, 601):
        message = failure(await call(location, "bash", command="true", timeout=timeout))
        assert "more than 0 and at most 600" in message


async def test_a_timeout_kills_the_process_group(
    location: pegboard.Location, workspace: Path
) -> None:
    """At the timeout the whole group is stopped; the result says so and keeps the output."""
    started = time.monotonic()
    outcome = await call(
        location,
        "bash",
        command="echo $$ > pids; sleep 30 & echo $! >> pids; echo started; wait",
        timeout=0.5,
    )
    assert time.monotonic() - started < 5
    assert text(outcome).startswith("started\n")
    assert "(timed out after 0.5 s: the process group was stopped (killed by SIGTERM))" in (
        text(outcome)
    )
    assert (True, "SIGTERM", None) == (
        metadata(outcome)["timed_out"],
        metadata(outcome)["signal"],
        metadata(outcome)["exit_code"],
    )
    assert await gone(*await pids_in(workspace / "pids", 2))


async def test_a_command_that_ignores_sigterm_still_dies(
    location: pegboard.Location, workspace: Path
) -> None:
    """SIGTERM ignored, the group gets SIGKILL after the grace period."""
    started = time.monotonic()
    outcome = await call(
        location,
        "bash",
        command="trap '' TERM; sleep 1000 & echo $! > pids; echo $$ >> pids; wait",
        timeout=0.3,
    )
    assert time.monotonic() - started < 6
    assert "SIGKILL" == metadata(outcome)["signal"]
    assert "timed out after 0.3 s" in text(outcome)
    assert await gone(*await pids_in(workspace / "pids", 2))


async def test_a_cancelled_call_leaves_no_process_behind(
    location: pegboard.Location, workspace: Path
) -> None:
    """Cancelling kills the shell and its background child, even ignoring SIGTERM; the
    cancellation propagates, and the spool no result will name is deleted."""
    earlier = Path(
        metadata(await call(location, "bash", command="head -c 3000000 /dev/zero"))["spool"]
    )
    finished = False
    command = (
        "trap '' TERM; head -c 3000000 /dev/zero; sleep 100 & echo $! > pids; echo $$ >> pids; "
        "sleep 100"
    )
    with anyio.move_on_after(15) as scope:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                nonlocal finished
                await call(location, "bash", command=command)
                finished = True

            group.start_soon(run)
            pids = await pids_in(workspace / "pids", 2)
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert not finished
    assert await gone(*pids)
    assert [earlier] == list(earlier.parent.iterdir())


async def test_sigterm_comes_first_with_time_to_clean_up(
    location: pegboard.Location, workspace: Path
) -> None:
    """Every process in the group that handles SIGTERM gets the grace period before SIGKILL,
    even after the shell itself is gone."""
    command = "(trap 'sleep 0.3; echo cleaned > cleaned; exit 0' TERM; sleep 100 & wait) & wait"
    outcome = await call(location, "bash", command=command, timeout=0.3)
    assert metadata(outcome)["timed_out"]
    assert "cleaned\n" == (workspace / "cleaned").read_text()


async def test_background_processes_end_with_the_command(
    location: pegboard.Location, workspace: Path
) -> None:
    """A command that leaves a child running returns promptly, and the child is stopped."""
    started = time.monotonic()
    outcome = await call(location, "bash", command="sleep 60 & echo $! > pids; echo done")
    assert time.monotonic() - started < 5
    assert "done\n\n(exit code 0)" == text(outcome)
    assert await gone(*await pids_in(workspace / "pids", 1))


async def test_progress_streams_the_output_a_few_times_a_second(
    location: pegboard.Location,
) -> None:
    """While output grows, progress carries its tail, at most every half second."""
    updates: list[pegboard.Progress] = []
    command = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.25; done"
    outcome = await call(location, "bash", context(updates), command=command)
    assert "tick 6" in text(outcome)
    assert 1 <= len(updates) <= 4
    first = updates[0]
    assert first.message is not None
    assert first.message.endswith("bytes of output so far")
    assert first.content[0].text.startswith("tick 1\n")  # type: ignore[union-attr]


async def test_undecodable_output_is_replaced_not_fatal(location: pegboard.Location) -> None:
    outcome = await call(location, "bash", command=r"printf 'caf\351\n'")
    assert "caf\ufffd\n\n(exit code 0)" == text(outcome)


async def test_200_mb_of_output_keeps_memory_bounded_and_spools_the_rest(
    location: pegboard.Location, workspace: Path
) -> None:
    """1 MiB of head and 1 MiB of tail stay in memory; all 200 MB are in the spool."""
    total = 200_000_000
    tracemalloc.start()
    try:
        outcome = await call(location, "bash", command=f"yes 0123456789 | head -c {total}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    data = metadata(outcome)
    assert (total, 2 * MiB, total, 0) == (
        data["output_bytes"],
        data["kept_bytes"],
        data["spooled_bytes"],
        data["lost_bytes"],
    )
    assert peak < 40 * MiB
    spool = Path(data["spool"])
    assert total == spool.stat().st_size
    assert b"0123456789\n" * 3 == read_start(spool, 33)
    shown = text(outcome)
    assert f"all {total:,} bytes are saved in {spool}" in shown
    assert "the full output is saved in" in shown  # the pipeline then bounded the 2 MiB shown


def read_start(path: Path, size: int) -> bytes:
    with path.open("rb") as file:
        return file.read(size)


# Capture: exact accounting, whatever the limits.


def feed(capture: Capture, data: bytes, chunk: int = 7) -> None:
    for start in range(0, len(data), chunk):
        capture.feed(data[start : start + chunk])


def test_capture_within_memory_keeps_everything(tmp_path: Path) -> None:
    capture = Capture(tmp_path, head_bytes=10, tail_bytes=10, spool_bytes=100)
    feed(capture, bytes(range(20)))
    assert (bytes(range(10)), bytes(range(10, 20))) == (capture.head, capture.tail)
    assert (None, 0, 0, 20) == (capture.spool, capture.spooled, capture.lost, capture.retained)


def test_capture_spools_everything_once_memory_would_lose_bytes(tmp_path: Path) -> None:
    data = os.urandom(1000)
    capture = Capture(tmp_path, head_bytes=10, tail_bytes=10, spool_bytes=10_000)
    feed(capture, data)
    capture.close()
    assert (data[:10], data[-10:], 0) == (capture.head, capture.tail, capture.lost)
    assert capture.spool is not None
    assert data == capture.spool.read_bytes()


def test_capture_reports_what_a_full_spool_lost(tmp_path: Path) -> None:
    data = os.urandom(1000)
    capture = Capture(tmp_path, head_bytes=10, tail_bytes=10, spool_bytes=300)
    feed(capture, data)
    capture.close()
    assert capture.spool is not None
    assert data[:300] == capture.spool.read_bytes()
    assert 1000 - 300 - 10 == capture.lost
    assert "full" in (capture.spool_error or "")


def test_capture_without_a_spool_reports_the_middle_lost(tmp_path: Path) -> None:
    data = os.urandom(1000)
    capture = Capture(tmp_path / "missing", head_bytes=10, tail_bytes=10, spool_bytes=10_000)
    feed(capture, data)
    assert (data[:10], data[-10:]) == (capture.head, capture.tail)
    assert (None, 980) == (capture.spool, capture.lost)
    assert "could not be created" in (capture.spool_error or "")


def test_capture_memory_stays_bounded(tmp_path: Path) -> None:
    """However much goes in, memory holds the head, the tail and one chunk at most."""
    capture = Capture(tmp_path, head_bytes=100, tail_bytes=100, spool_bytes=0)
    feed(capture, b"x" * 100_000, chunk=30)
    assert capture.retained == 200
    assert len(b"".join(capture._tail)) <= 100 + 30


def test_capture_recent_is_the_last_bytes(tmp_path: Path) -> None:
    capture = Capture(tmp_path, head_bytes=5, tail_bytes=5, spool_bytes=0)
    feed(capture, b"abcdefg", chunk=2)
    assert b"defg" == capture.recent(4)
    assert b"abcdefg" == capture.recent(100)


def test_a_discarded_spool_is_deleted(tmp_path: Path) -> None:
    capture = Capture(tmp_path, head_bytes=1, tail_bytes=1, spool_bytes=100)
    feed(capture, b"abcdef")
    capture.discard()
    assert [] == list(tmp_path.iterdir())
