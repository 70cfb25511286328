"""Managed storage: private whole files, one area per Location, pruned by the names' time."""

from __future__ import annotations

import datetime
import errno
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from builtin_calls import ALLOW_ALL
from builtin_calls import call as builtin_call
from retained import STAMP, area, echo_tool, listing, run_once

import pegboard

pytestmark = pytest.mark.anyio

SMALL = pegboard.OutputLimits(max_lines=8, max_bytes=1024)
MANAGED_NAME = re.compile(r"[A-Za-z0-9._-]+")


# Files: private, whole, never through a link


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_saved_files_are_owner_only(storage_dir: Path) -> None:
    """A retained file has mode 0600, in a directory of mode 0700."""
    path = await pegboard.ManagedStorage(storage_dir).save(b"whole output")
    assert storage_dir == path.parent
    assert b"whole output" == await anyio.Path(path).read_bytes()
    assert 0o600 == mode(path)
    assert 0o700 == mode(storage_dir)


async def test_an_open_storage_directory_is_made_private(storage_dir: Path) -> None:
    """A pre-existing 0755 storage directory becomes 0700 before anything is saved in it."""
    await anyio.Path(storage_dir).mkdir()
    await anyio.Path(storage_dir).chmod(0o755)
    await pegboard.ManagedStorage(storage_dir).save(b"whole output")
    assert 0o700 == mode(storage_dir)


async def test_file_names_carry_no_caller_text(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """No tool name, call ID or content finds its way into a retained file's name."""
    runner = context(
        "call-QQQ", session_id="session-QQQ", agent="agent-QQQ", message_id="message-QQQ"
    )
    text = "\n".join(["../../etc/passwd QQQ"] * 50)
    async with host.location(workspace, plugins=[], limits=SMALL, storage=storage_dir) as location:
        location.tools.register({"leaky": echo_tool(text)}, namespace="QQQ")
        await location.prepare().execute(pegboard.ToolCall("QQQ_leaky", "{}", runner))
    (name,) = listing(area(storage_dir, workspace))
    assert MANAGED_NAME.fullmatch(name)
    assert "QQQ" not in name
    assert "leaky" not in name


async def test_unwritable_storage_fails_the_call_with_retention_error(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """When the storage directory cannot be made, the call raises RetentionError."""
    blocker = anyio.Path(storage_dir)
    async with host.location(workspace, plugins=[], limits=SMALL, storage=storage_dir) as location:
        await blocker.write_bytes(b"not a directory")
        location.tools.register({"big": echo_tool("x\n" * 100)})
        with pytest.raises(pegboard.RetentionError, match=re.escape(str(storage_dir))):
            await location.prepare().execute(pegboard.ToolCall("big", "{}", context()))
    assert b"not a directory" == await blocker.read_bytes()


async def test_storage_inside_a_regular_file_fails_the_call_with_retention_error(
    host: pegboard.Host,
    workspace: Path,
    tmp_path: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """A storage path inside a regular file fails only the oversized call, as RetentionError."""
    blocker = anyio.Path(tmp_path / "blocker")
    await blocker.write_bytes(b"a regular file")
    with pytest.raises(pegboard.RetentionError):
        await run_once(
            host, workspace, echo_tool("x\n" * 100), context(), limits=SMALL, storage=blocker / "x"
        )
    assert b"a regular file" == await blocker.read_bytes()


class DiskFull:
    """A file that writes half of what it is given, then runs out of space."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def __enter__(self) -> DiskFull:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file.close()

    def flush(self) -> None:
        self._file.flush()

    def fileno(self) -> int:
        return int(self._file.fileno())

    def write(self, data: bytes) -> int:
        self._file.write(data[: len(data) // 2])
        self._file.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


async def test_a_failed_write_leaves_no_partial_file(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write that fails midway raises RetentionError and removes the partial file."""
    real_fdopen = os.fdopen
    monkeypatch.setattr(
        os, "fdopen", lambda *args, **kwargs: DiskFull(real_fdopen(*args, **kwargs))
    )
    with pytest.raises(pegboard.RetentionError, match="No space left"):
        await run_once(
            host, workspace, echo_tool("x\n" * 100), context(), limits=SMALL, storage=storage_dir
        )
    assert [] == listing(area(storage_dir, workspace))


def fix_names(monkeypatch: pytest.MonkeyPatch, token: str, stamp: str) -> str:
    """Make the next retained file's name predictable; return it."""
    real_strftime = time.strftime

    def strftime(format: str, *args: Any) -> str:
        return stamp if format == "%Y%m%dT%H%M%S" else real_strftime(format, *args)

    monkeypatch.setattr(time, "strftime", strftime)
    monkeypatch.setattr("secrets.token_hex", lambda nbytes=None: token)
    return f"tool-output-{stamp}-{token}.txt"


@pytest.mark.parametrize("target_exists", [True, False])
async def test_a_planted_symlink_is_never_followed(
    tmp_path: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch, target_exists: bool
) -> None:
    """A symlink planted under the next file's name makes the save fail, not write through."""
    name = fix_names(monkeypatch, "0123456789abcdef", "20250101T000000")
    directory = anyio.Path(storage_dir)
    await directory.mkdir(mode=0o700)
    target = anyio.Path(tmp_path / "victim")
    if target_exists:
        await target.write_bytes(b"precious")
    await (directory / name).symlink_to(target)
    with pytest.raises(pegboard.RetentionError):
        await pegboard.ManagedStorage(storage_dir).save(b"attacker-chosen bytes")
    assert target_exists == await target.exists()
    if target_exists:
        assert b"precious" == await target.read_bytes()
    assert await (directory / name).is_symlink()


def stamp(age: datetime.timedelta) -> str:
    """The timestamp a file made ``age`` ago carries in its name."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - age.total_seconds()))


def plant(
    directory: Path,
    name: str,
    age: datetime.timedelta = datetime.timedelta(0),
    link_to: Path | None = None,
) -> Path:
    """Make a file (or a symlink to ``link_to``) in ``directory`` whose mtime is ``age`` old."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / name
    if link_to is None:
        path.write_bytes(b"data")
    else:
        path.symlink_to(link_to)
    when = time.time() - age.total_seconds()
    os.utime(path, (when, when), follow_symlinks=False)
    return path


OLD, RECENT = datetime.timedelta(days=8), datetime.timedelta(days=6)


async def test_prune_deletes_only_our_old_files(tmp_path: Path, storage_dir: Path) -> None:
    """prune() removes retained files past the retention and nothing else."""
    storage = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(days=7))
    outside = anyio.Path(tmp_path / "outside")
    await outside.write_bytes(b"kept")
    plant(storage_dir, f"tool-output-{stamp(OLD)}-00000000000000aa.txt")
    kept = [
        f"tool-output-{stamp(OLD)}-00000000000000aa.txt.bak",
        f"tool-output-{stamp(OLD)}-00000000000000cc.txt",
        f"tool-output-{stamp(OLD)}-00000000000000dd.txt",
        f"tool-output-{stamp(RECENT)}-00000000000000bb.txt",
        "zz-notes.txt",
    ]
    plant(storage_dir, kept[0])
    plant(storage_dir, kept[1], link_to=Path(outside))
    await anyio.Path(storage_dir / kept[2]).mkdir()
    plant(storage_dir, kept[3])
    plant(storage_dir, kept[4], OLD)
    assert 1 == await storage.prune()
    assert sorted(kept) == listing(storage_dir)
    assert b"kept" == await outside.read_bytes()


async def test_prune_reads_the_age_from_the_name_not_the_clock_of_the_file(
    storage_dir: Path,
) -> None:
    """A file's name decides its age: a touched old file goes, an old-looking new one stays."""
    touched = plant(storage_dir, f"tool-output-{stamp(OLD)}-00000000000000aa.txt", RECENT)
    backdated = plant(storage_dir, f"tool-output-{stamp(RECENT)}-00000000000000bb.txt", OLD)
    assert 1 == await pegboard.ManagedStorage(storage_dir).prune()
    assert [backdated.name] == listing(storage_dir)
    assert not touched.exists()


async def test_saved_files_are_on_disk_before_save_returns(
    storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save() fsyncs the new file, after its last byte, and the directory that names it."""
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        info = os.fstat(descriptor)
        synced.append((info.st_ino, info.st_size))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    path = await pegboard.ManagedStorage(storage_dir).save(b"whole output")
    assert (path.stat().st_ino, len(b"whole output")) in synced
    assert storage_dir.stat().st_ino in [inode for inode, _ in synced]


# Written whole or not at all: a hidden pending name until the file is complete

PENDING_NAME = re.compile(r"\.tool-output-\d{8}T\d{6}-[0-9a-f]{16}\.txt\.partial")
FINAL_NAME = re.compile(r"tool-output-\d{8}T\d{6}-[0-9a-f]{16}\.txt")

#: Retains a large output through a real Location; its first write stops halfway
#: and says so on standard output, so the test can kill the process right there.
STOPS_MIDWAY = """
import os, sys, anyio, pegboard

real_fdopen = os.fdopen

class Midway:
    def __init__(self, file):
        self._file = file
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self._file.__exit__(*exc)
    def write(self, data):
        self._file.write(data[: len(data) // 2])
        self._file.flush()
        print("writing", flush=True)
        sys.stdin.read()  # until killed

os.fdopen = lambda *args, **kwargs: Midway(real_fdopen(*args, **kwargs))

async def main(workspace, storage):
    async def execute(input, context):
        return pegboard.ToolResponse(content="x" * 4_000_000)
    limits = pegboard.OutputLimits(max_lines=8, max_bytes=1024)
    opening = pegboard.Host().location(workspace, plugins=[], limits=limits, storage=storage)
    async with opening as location:
        big = pegboard.tool(description="Big.", execute=execute)
        with location.tools.register({"big": big}):
            context = pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c")
            await location.prepare().execute(pegboard.ToolCall("big", "{}", context))

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def kill_midway(workspace: Path, storage_dir: Path) -> None:
    """Retain a large output in a new process and kill it (SIGKILL) in the middle of the write."""
    with subprocess.Popen(
        [sys.executable, "-c", STOPS_MIDWAY, str(workspace), str(storage_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert "writing\n" == child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        assert -signal.SIGKILL == child.wait(timeout=60)


def backdate(path: Path, age: datetime.timedelta) -> None:
    when = time.time() - age.total_seconds()
    os.utime(path, (when, when), follow_symlinks=False)


async def test_a_write_killed_midway_leaves_no_file_under_a_managed_name(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """kill -9 mid-write leaves only a hidden pending file; opening the Location removes it."""
    await anyio.to_thread.run_sync(kill_midway, workspace, storage_dir)
    directory = area(storage_dir, workspace)
    (leftover,) = listing(directory)
    assert PENDING_NAME.fullmatch(leftover)
    assert 0 < (directory / leftover).stat().st_size < 4_000_000
    # Two hours on: the area is due for listing, and the leftover is no one's.
    # (The child found no area to list when it opened, so it left no stamp.)
    assert not (directory / STAMP).exists()
    backdate(directory / leftover, datetime.timedelta(hours=2))
    async with host.location(workspace, plugins=[], storage=storage_dir) as location:
        assert directory == location.storage.directory
    assert [] == listing(directory)


async def test_a_saved_file_has_its_final_name_only_when_whole(
    storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the bytes are written and flushed the file is pending; then it takes its name."""
    seen: list[list[str]] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        seen.append(listing(storage_dir))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    path = await pegboard.ManagedStorage(storage_dir).save(b"whole output")
    assert PENDING_NAME.fullmatch(seen[0][0])
    assert [f".{path.name}.partial"] == seen[0]
    assert [path.name] == listing(storage_dir)
    assert FINAL_NAME.fullmatch(path.name)


async def test_a_pending_file_with_a_live_writer_is_never_pruned(storage_dir: Path) -> None:
    """A file still being written stays, however long ago it was last written to."""
    storage = pegboard.ManagedStorage(storage_dir)
    descriptor, path = storage.begin_sync()
    pending = storage_dir / f".{path.name}.partial"
    try:
        os.write(descriptor, b"so far")
        backdate(pending, datetime.timedelta(days=1))
        assert 0 == await storage.prune(force=True)
        assert [pending.name] == listing(storage_dir)
    finally:
        storage.abandon_sync(descriptor, path)
    assert [] == listing(storage_dir)


async def test_an_abandoned_pending_file_is_spared_for_a_grace_period(storage_dir: Path) -> None:
    """A pending file no one holds goes once untouched for a minute; younger, it stays."""
    recent = plant(storage_dir, f".tool-output-{stamp(OLD)}-00000000000000aa.txt.partial")
    old = plant(
        storage_dir,
        f".tool-output-{stamp(RECENT)}-00000000000000bb.txt.partial",
        datetime.timedelta(minutes=2),
    )
    unrelated = plant(storage_dir, ".notes.partial", OLD)
    assert 1 == await pegboard.ManagedStorage(storage_dir).prune(force=True)
    assert sorted([recent.name, unrelated.name]) == listing(storage_dir)
    assert not old.exists()


def test_a_pending_file_older_than_the_retention_goes_even_if_held(storage_dir: Path) -> None:
    """A lock leaked to a process that never ends keeps a pending file no longer than any file."""
    storage = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(hours=1))
    descriptor, path = storage.begin_sync()
    try:
        backdate(storage_dir / f".{path.name}.partial", datetime.timedelta(hours=2))
        assert 1 == anyio.run(lambda: storage.prune(force=True))
        assert [] == listing(storage_dir)
    finally:
        os.close(descriptor)


async def test_a_streamed_file_takes_its_name_when_finished(storage_dir: Path) -> None:
    """begin_sync, write, finish_sync: the path returned up front then holds every byte."""
    storage = pegboard.ManagedStorage(storage_dir)
    descriptor, path = storage.begin_sync()
    assert storage_dir == path.parent
    assert FINAL_NAME.fullmatch(path.name)
    os.write(descriptor, b"streamed ")
    assert not path.exists()
    os.write(descriptor, b"output")
    await anyio.to_thread.run_sync(storage.finish_sync, descriptor, path)
    assert [path.name] == listing(storage_dir)
    assert b"streamed output" == await anyio.Path(path).read_bytes()
    assert 0o600 == mode(path)


async def test_finishing_never_replaces_a_planted_name(tmp_path: Path, storage_dir: Path) -> None:
    """A symlink planted under the final name meanwhile fails the finish and stays untouched."""
    storage = pegboard.ManagedStorage(storage_dir)
    descriptor, path = storage.begin_sync()
    os.write(descriptor, b"attacker-chosen bytes")
    path.symlink_to(tmp_path / "victim")
    with pytest.raises(pegboard.RetentionError, match="cannot retain tool output"):
        storage.finish_sync(descriptor, path)
    assert path.is_symlink()
    assert [path.name] == listing(storage_dir)
    assert not (tmp_path / "victim").exists()


# One area per Location


async def retain(location: pegboard.Location, text: str) -> Path:
    """Call a tool whose output is too long to show; return the managed file it names."""
    with location.tools.register({"big": echo_tool(text)}):
        outcome = await location.prepare().execute(
            pegboard.ToolCall("big", "{}", pegboard.ToolContext("s", "a", "m", "c"))
        )
    assert isinstance(outcome, pegboard.Completed)
    preview = outcome.content[0]
    assert isinstance(preview, pegboard.Text)
    found = re.search(r"the full output is saved in (\S+) ", preview.text)
    assert found is not None, preview.text
    return Path(found.group(1))


def tool_text(outcome: pegboard.Outcome) -> str:
    if isinstance(outcome, pegboard.Failed):
        return outcome.error.message
    return "\n".join(item.text for item in outcome.content if isinstance(item, pegboard.Text))


@pytest.mark.parametrize("given", ["default", "directory"])
async def test_law_storage_encapsulation_a_location_cannot_reach_another_locations_output(
    host: pegboard.Host, tmp_path: Path, storage_dir: Path, given: str
) -> None:
    """Location B's read, glob and grep neither list nor read what Location A retained."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    options: dict[str, Any] = {"limits": SMALL, "permissions": ALLOW_ALL, "plugins": ["builtin"]}
    if given == "directory":
        options["storage"] = storage_dir
    secret = "\n".join(f"SECRET-{number}" for number in range(100))
    async with host.location(first, **options) as one:
        saved = await retain(one, secret)
        assert saved.parent == one.storage.directory
        own = await builtin_call(one, "read", path=str(saved), limit=1)
        assert "SECRET-0" in tool_text(own)
    async with host.location(second, **options) as two:
        assert two.storage.directory != saved.parent
        assert two.storage.directory.parent == saved.parent.parent
        read = await builtin_call(two, "read", path=str(saved))
        listings = [
            await builtin_call(two, "glob", pattern="**/*", path=str(saved.parent)),
            await builtin_call(two, "glob", pattern="**/*.txt", path=str(saved.parent.parent)),
            await builtin_call(two, "grep", pattern="SECRET", path=str(saved.parent)),
            await builtin_call(two, "grep", pattern="SECRET", path=str(saved.parent.parent)),
        ]
    assert isinstance(read, pegboard.Failed)
    assert "SECRET" not in tool_text(read)
    for outcome in listings:  # refused: no file name, no line of it
        assert isinstance(outcome, pegboard.Failed), tool_text(outcome)
        assert "SECRET" not in tool_text(outcome)
        assert saved.name not in tool_text(outcome)
    assert saved.exists()


def prune_in_a_new_process(directory: Path) -> int:
    """How many files ``ManagedStorage(directory).prune()`` removes in a fresh interpreter."""
    script = (
        "import sys, datetime, anyio, pegboard\n"
        "storage = pegboard.ManagedStorage(sys.argv[1], retention=datetime.timedelta(days=64))\n"
        "print(anyio.run(storage.prune))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(result.stdout)


def expired(directory: Path, token: str) -> Path:
    return plant(directory, f"tool-output-{stamp(datetime.timedelta(days=65))}-{token:0>16}.txt")


def test_a_new_process_does_not_list_an_area_another_listed_recently(storage_dir: Path) -> None:
    """The prune stamp spans processes: a command run again soon lists nothing; later it does."""
    expired(storage_dir, "aa")
    assert 1 == prune_in_a_new_process(storage_dir)
    written = (storage_dir / STAMP).lstat()
    assert stat.S_ISREG(written.st_mode)
    assert 0o600 == stat.S_IMODE(written.st_mode)
    late = expired(storage_dir, "bb")
    assert 0 == prune_in_a_new_process(storage_dir)  # within a day (1/64 of 64 days)
    assert late.exists()
    a_day_ago = time.time() - datetime.timedelta(days=1, seconds=1).total_seconds()
    os.utime(storage_dir / STAMP, (a_day_ago, a_day_ago))
    assert 1 == prune_in_a_new_process(storage_dir)
    assert not late.exists()
    assert time.time() - (storage_dir / STAMP).stat().st_mtime < 60
    # A stamp from the future (a wrong clock, or a planted file) postpones nothing.
    expired(storage_dir, "cc")
    in_a_year = time.time() + datetime.timedelta(days=365).total_seconds()
    os.utime(storage_dir / STAMP, (in_a_year, in_a_year))
    assert 1 == prune_in_a_new_process(storage_dir)


def test_a_stamp_that_cannot_be_written_does_not_stop_the_prune(storage_dir: Path) -> None:
    """Pruning is housekeeping: a folder in the stamp's place costs a listing, never an error."""
    old = expired(storage_dir, "aa")
    (storage_dir / STAMP).mkdir()
    assert 1 == prune_in_a_new_process(storage_dir)
    assert not old.exists()
    assert (storage_dir / STAMP).is_dir()


def test_a_prune_stamp_that_is_a_symlink_is_neither_trusted_nor_followed(
    tmp_path: Path, storage_dir: Path
) -> None:
    """A symlink in the stamp's place does not skip the listing, and its target is not touched."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("not ours")
    an_hour_ago = time.time() - 3600
    os.utime(target, (an_hour_ago, an_hour_ago))  # read through the link: "listed an hour ago"
    old = expired(storage_dir, "aa")
    (storage_dir / STAMP).symlink_to(target)
    assert 1 == prune_in_a_new_process(storage_dir)
    assert not old.exists()
    assert (storage_dir / STAMP).is_symlink()
    assert an_hour_ago == pytest.approx(target.stat().st_mtime, abs=1e-3)
    assert "not ours" == target.read_text()


async def test_law_storage_encapsulation_pruning_touches_only_the_pruning_locations_area(
    host: pegboard.Host, tmp_path: Path, storage_dir: Path
) -> None:
    """Opening B with a short retention prunes B's expired files, never A's."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    expired = f"tool-output-{stamp(datetime.timedelta(hours=2))}-00000000000000aa.txt"
    fresh = f"tool-output-{stamp(datetime.timedelta(0))}-00000000000000bb.txt"
    for root in (first, second):
        plant(area(storage_dir, root), expired)
        plant(area(storage_dir, root), fresh)
    short = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(hours=1))
    async with host.location(second, plugins=[], storage=short) as location:
        assert area(storage_dir, second) == location.storage.directory
    assert [fresh] == listing(area(storage_dir, second))
    assert sorted([expired, fresh]) == listing(area(storage_dir, first))


async def test_a_location_opened_again_finds_what_it_retained(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The same root maps to the same area: a file named in an earlier result stays readable."""
    options: dict[str, Any] = {"limits": SMALL, "permissions": ALLOW_ALL, "plugins": ["builtin"]}
    async with host.location(workspace, storage=storage_dir, **options) as location:
        saved = await retain(location, "\n".join(f"row {n}" for n in range(100)))
    async with host.location(workspace, storage=storage_dir, **options) as again:
        assert saved.parent == again.storage.directory
        assert "row 0" in tool_text(await builtin_call(again, "read", path=str(saved), limit=1))


async def test_a_host_storage_directory_gets_one_area_per_location(
    host: pegboard.Host, tmp_path: Path, storage_dir: Path
) -> None:
    """storage= names the parent of the areas; retention and subclasses carry over."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    given = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(hours=3))
    async with (
        host.location(first, plugins=[], storage=given) as one,
        host.location(second, plugins=[], storage=given) as two,
    ):
        assert storage_dir == one.storage.directory.parent == two.storage.directory.parent
        assert one.storage.directory != two.storage.directory
        assert datetime.timedelta(hours=3) == one.storage.retention
        assert [one.storage.directory] == [Path(one.filesystem.resolve(one.storage.directory))]
        with pytest.raises(pegboard.OutsideLocationError):
            one.filesystem.resolve(two.storage.directory / "tool-output-x.txt")
        with pytest.raises(pegboard.OutsideLocationError):
            one.filesystem.resolve(storage_dir)


@pytest.mark.parametrize(
    "directory",
    ["/tmp/" + "d" * 600, "/tmp/two\nlines", "/tmp/tab\there"],
    ids=["long", "newline", "tab"],
)
def test_storage_directories_that_would_break_the_preview_are_refused(directory: str) -> None:
    """A storage path too long or not printable on one line is refused up front."""
    with pytest.raises(ValueError, match="printable path of at most 512 bytes"):
        pegboard.ManagedStorage(directory)


async def test_a_process_lists_an_area_at_most_once_per_fraction_of_the_retention(
    storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning again soon after a prune lists nothing; later, or forced, it lists and deletes."""
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    storage = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(days=64))
    plant(storage_dir, f"tool-output-{stamp(datetime.timedelta(days=65))}-00000000000000aa.txt")
    assert 1 == await storage.prune()
    late = plant(
        storage_dir, f"tool-output-{stamp(datetime.timedelta(days=65))}-00000000000000bb.txt"
    )
    assert 0 == await storage.prune()  # within a day (1/64 of 64 days) of the last listing
    assert [os.fspath(storage_dir)] == listed
    assert late.exists()
    assert 1 == await storage.prune(force=True)
    assert not late.exists()
    later = plant(
        storage_dir, f"tool-output-{stamp(datetime.timedelta(days=65))}-00000000000000cc.txt"
    )
    day = time.time() + datetime.timedelta(days=1, seconds=1).total_seconds()
    monkeypatch.setattr(time, "time", lambda: day)
    assert 1 == await storage.prune()
    assert not later.exists()
    assert 3 == len(listed)


async def test_an_empty_storage_path_is_refused_not_the_current_folder(
    host: pegboard.Host, workspace: Path
) -> None:
    """storage="" (an unset variable, say) would put managed files in the current folder:
    it is refused with what to give instead."""
    with pytest.raises(ValueError, match="managed storage directory is an empty path"):
        async with host.location(workspace, plugins=[], storage=""):
            raise AssertionError("the Location opened")
