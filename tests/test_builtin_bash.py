"""The bash tool: process groups, timeouts, cancellation, bounded and spooled output."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from builtin_calls import call, call_folders_held, failure, metadata, opened, running, text

import pegboard
from pegboard.plugins_builtin._capture import Capture

pytestmark = pytest.mark.anyio

MiB = 1 << 20


@pytest.fixture
def sandbox_mode() -> str:
    """The sandbox the test's Location asks for (overridden by tests that need ``off``)."""
    return "auto"


#: These tests read host process IDs a command writes with `$$` and `$!`; in the
#: sandbox's PID namespace those are not the host's, so they test the unconfined
#: path (the sandboxed one: tests/test_sandbox_attacks.py finds processes by marker).
host_pids = pytest.mark.parametrize("sandbox_mode", ["off"])


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path, sandbox_mode: str
) -> AsyncIterator[pegboard.Location]:
    async with opened(host, workspace, storage_dir, sandbox=sandbox_mode) as opened_location:
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


@host_pids
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


@host_pids
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


@host_pids
async def test_a_cancelled_call_leaves_no_process_behind(
    location: pegboard.Location, workspace: Path
) -> None:
    """Cancelling kills the shell and its background child, even ignoring SIGTERM; the
    cancellation propagates, and the spool no result will name is deleted."""
    earlier = Path(
        metadata(await call(location, "bash", command="head -c 3000000 /dev/zero"))["spool"]
    )
    retained = sorted(earlier.parent.iterdir())  # the spool and the pipeline's own file
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
    assert retained == sorted(earlier.parent.iterdir())


async def test_sigterm_comes_first_with_time_to_clean_up(
    location: pegboard.Location, workspace: Path
) -> None:
    """Every process in the group that handles SIGTERM gets the grace period before SIGKILL,
    even after the shell itself is gone."""
    command = "(trap 'sleep 0.3; echo cleaned > cleaned; exit 0' TERM; sleep 100 & wait) & wait"
    outcome = await call(location, "bash", command=command, timeout=0.3)
    assert metadata(outcome)["timed_out"]
    assert "cleaned\n" == (workspace / "cleaned").read_text()


@host_pids
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
    (tmp_path / "not-a-folder").write_bytes(b"")
    capture = Capture(tmp_path / "not-a-folder", head_bytes=10, tail_bytes=10, spool_bytes=10_000)
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


# Permissions: every form of running `rm` is seen, whatever hides it.

#: Shell forms that delete the folder `target` when they run.
DELETING = [
    "rm -rf target",
    "/bin/rm -rf target",
    "\\rm -rf target",
    "'rm' -rf target",
    '"r"m -rf target',
    "r''m -rf target",
    "$'\\x72m' -rf target",
    "FOO=1 BAR=2 rm -rf target",
    "r\\\nm -rf target",
    "ls; rm -rf target",
    "ls && rm -rf target",
    "false || rm -rf target",
    "ls\nrm -rf target",
    "ls | rm -rf target",
    "ls |& rm -rf target",
    "rm -rf target & wait",
    "(rm -rf target)",
    "{ rm -rf target; }",
    "if true; then rm -rf target; fi",
    "if false; then :; else rm -rf target; fi",
    "for i in 1; do rm -rf target; done",
    "for ((i=0; i<1; i++)); do rm -rf target; done",
    "while true; do rm -rf target; break; done",
    "until false; do rm -rf target; break; done",
    "case x in x) rm -rf target;; esac",
    "select v in a; do rm -rf target; break; done <<< 1",
    "f() { rm -rf target; }; f",
    "function f { rm -rf target; }; f",
    "echo $(rm -rf target)",
    'echo "$(rm -rf target)"',
    "echo `rm -rf target`",
    'echo "`rm -rf target`"',
    "cat <(rm -rf target)",
    "ls > >(rm -rf target)",
    "git status <(rm -rf target)",
    "a=$(rm -rf target)",
    "[[ -n $(rm -rf target) ]]",
    "echo ${v:-$(rm -rf target)}",
    "cat <<EOF\n$(rm -rf target)\nEOF",
    "cat <<< $(rm -rf target)",
    "time rm -rf target",
    "! rm -rf target",
    "coproc rm -rf target; wait",
    "coproc w { rm -rf target; }; wait",
    "env rm -rf target",
    "env -i FOO=1 rm -rf target",
    "command rm -rf target",
    "exec rm -rf target",
    "nohup rm -rf target",
    "nice -n 5 rm -rf target",
    "timeout 5 rm -rf target",
    "stdbuf -o0 rm -rf target",
    "echo target | xargs rm -rf",
    "find . -maxdepth 1 -name target -exec rm -rf {} +",
    "find . -maxdepth 1 -name target -execdir rm -rf {} \\;",
    "sh -c 'rm -rf target'",
    'bash -c "rm -rf target"',
    "bash -c 'sh -c \"rm -rf target\"'",
    "trap 'rm -rf target' EXIT",
    "eval 'rm -rf target'",
    "x=rm; $x -rf target",
    "x='rm -rf target'; sh -c \"$x\"",
    "echo 'rm -rf target' | bash",
    "f=$(mktemp); echo 'rm -rf target' > $f; . $f",
    "PATH=/bin:$PATH rm -rf target",
    "x='a[$(rm -rf target)]'; echo $((x))",
    "PS4='$(rm -rf target)'; set -x; true",
    "time ! rm -rf target",
    "git -c alias.x='!rm -rf target' x",
]
#: An allow-list a cautious host might give.
ALLOW_LIST = [
    {"action": "bash", "resource": pattern, "effect": "allow"}
    for pattern in ("git *", "ls *", "echo *", "cat *", "find *", "true", "false", "wait", ":")
]
DENY_RM = [
    {"action": "*", "resource": "*", "effect": "allow"},
    {"action": "bash", "resource": "rm *", "effect": "deny"},
]


class Refuser:
    """Refuses every question (with feedback), recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[pegboard.PermissionRequest] = []

    async def __call__(self, request: pegboard.PermissionRequest) -> pegboard.Reject:
        self.asked.append(request)
        return pegboard.Reject("not this")


async def approve(request: pegboard.PermissionRequest) -> str:
    return "once"


def test_the_corpus_holds_forty_forms_and_more() -> None:
    assert len(set(DELETING)) >= 40


async def run_form(
    host: pegboard.Host, root: Path, storage: Path, form: str, **options: Any
) -> pegboard.Outcome:
    target = root / "target"
    target.mkdir(exist_ok=True)
    (target / "keep.txt").write_text("kept")
    async with opened(host, root, storage, **options) as location:
        return await call(location, "bash", command=form, timeout=10)


@pytest.mark.parametrize("form", DELETING)
async def test_each_form_deletes_the_folder_when_approved(
    host: pegboard.Host, workspace: Path, storage_dir: Path, form: str
) -> None:
    """The corpus is real: approved, each form does delete `target`."""
    outcome = await run_form(host, workspace, storage_dir, form, permissions=(), approver=approve)
    assert isinstance(outcome, pegboard.Completed), outcome
    assert not (workspace / "target").exists(), text(outcome)


@pytest.mark.parametrize("form", DELETING)
@pytest.mark.parametrize("rules", [DENY_RM, ALLOW_LIST], ids=["deny-rm", "allow-list"])
async def test_no_form_deletes_the_folder_against_the_rules(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    form: str,
    rules: list[dict[str, str]],
) -> None:
    """With `allow *` then `deny rm *`, or an allow-list, every form is denied or asked."""
    refuser = Refuser()
    outcome = await run_form(
        host, workspace, storage_dir, form, permissions=rules, approver=refuser
    )
    assert isinstance(outcome, pegboard.Failed), text(outcome)
    assert (workspace / "target" / "keep.txt").exists()


class Answers:
    """Answers 'always' to the first question and refuses the rest, recording them all."""

    def __init__(self) -> None:
        self.asked: list[pegboard.PermissionRequest] = []

    async def __call__(self, request: pegboard.PermissionRequest) -> str | pegboard.Reject:
        self.asked.append(request)
        return "always" if len(self.asked) == 1 else pegboard.Reject("not this")


@pytest.mark.parametrize(
    ("approved", "escalation"),
    [
        ("echo hello", 'echo "$(rm -rf target)"'),
        ("echo hello", "echo `rm -rf target`"),
        ("echo hello", "echo hi; rm -rf target"),
        ("ls", "ls $(rm -rf target)"),
        ("git status", "git status <(rm -rf target)"),
        ("git status", "git push --force"),
        ("python3 -c 'print(1)'", "python3 -c 'import shutil; shutil.rmtree(\"target\")'"),
        ("npm run test", "npm run deploy"),
        ("eval 'echo hi'", "eval 'echo hi'"),
        ("echo hi > notes.txt", "echo hi > .env"),
        ("cat notes.txt", "cat notes.txt | sh"),
        ("find . -name '*.txt'", "find target -delete"),
        (
            "python3 - <<EOF\nprint(1)\nEOF",
            "python3 - <<EOF\nimport shutil; shutil.rmtree('target')\nEOF",
        ),
    ],
)
async def test_always_escalation_cases_ask_again(
    host: pegboard.Host, workspace: Path, storage_dir: Path, approved: str, escalation: str
) -> None:
    """'Always' on one command never lets a wider or embedding one run unasked."""
    answers = Answers()
    (workspace / "target").mkdir()
    async with opened(host, workspace, storage_dir, permissions=(), approver=answers) as location:
        await call(location, "bash", command=approved)
        first = len(answers.asked)
        outcome = await call(location, "bash", command=escalation)
    assert len(answers.asked) > first, "asked nothing"
    assert isinstance(outcome, pegboard.Failed)
    assert (workspace / "target").exists()


async def test_always_saves_a_pattern_per_analysed_command(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """'always' on a chain saves each command's prefix; those commands then run unasked."""
    answers = Answers()
    async with opened(host, workspace, storage_dir, permissions=(), approver=answers) as location:
        await call(location, "bash", command="git status --short && echo hello")
        outcome = await call(location, "bash", command="echo other; git status")
        saved = await location.permissions.approvals()
    assert isinstance(outcome, pegboard.Completed)
    assert 1 == len(answers.asked)
    assert ["git status *", "echo *"] == [approval.pattern for approval in saved]
    assert "git status --short && echo hello" == saved[0].command


async def test_redirections_ask_for_edit_and_path_rules_apply(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Writing by `>`, `>>`, `&>` or `tee` is an edit of that path, relative to the root."""
    (workspace / "src").mkdir()
    (workspace / "link").symlink_to(".env")  # a link is judged by where it points
    rules = [*DENY_RM, {"action": "edit", "resource": ".env", "effect": "deny"}]
    async with opened(host, workspace, storage_dir, permissions=rules) as location:
        for command, workdir in [
            ("echo x > .env", None),
            ("echo x >> ../.env", "src"),
            ("echo x &> .env", None),
            ("echo x | tee -a notes .env", None),
            ("echo x > link", None),
        ]:
            outcome = await call(location, "bash", command=command, workdir=workdir)
            assert "permission denied: edit on .env" in failure(outcome), command
        assert isinstance(
            await call(location, "bash", command="echo x > notes"), pegboard.Completed
        )
    assert not (workspace / ".env").exists()


async def test_a_write_to_a_path_known_only_when_it_runs_is_asked(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    refuser = Refuser()
    async with opened(host, workspace, storage_dir, approver=refuser) as location:
        outcome = await call(location, "bash", command='f=.env; echo x > "$f"')
        moved = await call(location, "bash", command="cd /tmp && echo x > file")
    assert isinstance(outcome, pegboard.Failed)
    assert isinstance(moved, pegboard.Failed)
    assert [("edit", ("$f",), ("$f",)), ("edit", ("file",), ("file",))] == [
        (asked.action, asked.resources, asked.opaque) for asked in refuser.asked
    ]


async def test_an_unreadable_command_is_asked_whole_under_allow_all(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    refuser = Refuser()
    async with opened(host, workspace, storage_dir, approver=refuser) as location:
        outcome = await call(location, "bash", command="echo 'unclosed; rm -rf target")
    assert isinstance(outcome, pegboard.Failed)
    [asked] = refuser.asked
    assert asked.resources == asked.opaque == ("echo 'unclosed; rm -rf target",)
    assert "cannot read" in asked.metadata["unreadable"]


async def test_the_approver_sees_control_characters_escaped(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A carriage return and a terminal escape cannot hide `rm -rf ~` behind `ls -la`."""
    refuser = Refuser()
    command = "rm -rf ~ #\r\x1b[2Kls -la"
    async with opened(host, workspace, storage_dir, permissions=(), approver=refuser) as location:
        await call(location, "bash", command=command)
    [asked] = refuser.asked
    assert "rm -rf ~ #\\r\\x1b[2Kls -la" == asked.metadata["command"]
    assert ("rm -rf '~'",) == asked.resources or ("rm -rf ~",) == asked.resources
    assert all("\x1b" not in resource and "\r" not in resource for resource in asked.resources)


# No process outlives its call.

ESCAPES = {
    "setsid": "setsid sh -c 'echo $$ > pids; exec sleep 100' > /dev/null 2>&1 &",
    "setsid -f": "setsid -f sh -c 'echo $$ > pids; exec sleep 100' > /dev/null 2>&1",
    "double fork": "( (sh -c 'echo $$ > pids; exec sleep 100' &) & ) > /dev/null 2>&1",
    "nohup &": "nohup sh -c 'echo $$ > pids; exec sleep 100' > /dev/null 2>&1 &",
    "setsid, TERM ignored": (
        "setsid sh -c 'trap \"\" TERM; echo $$ > pids; while :; do sleep 0.1; done' "
        "> /dev/null 2>&1 &"
    ),
}
#: Waits until the escaped process has written its ID (the machine may be slow).
WRITTEN = "while [ ! -s pids ]; do sleep 0.02; done"
needs_subreaper = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="other platforms stop the process group only"
)


@needs_subreaper
@pytest.mark.parametrize("command", ESCAPES.values(), ids=ESCAPES.keys())
@host_pids
async def test_what_leaves_the_group_is_gone_when_the_call_completes(
    location: pegboard.Location, workspace: Path, command: str
) -> None:
    """setsid, a double fork, nohup … &: none of them survives the call that started it."""
    started = time.monotonic()
    outcome = await call(location, "bash", command=f"{command}\n{WRITTEN}; echo done")
    assert "done" in text(outcome)
    assert time.monotonic() - started < 8
    assert await gone(*await pids_in(workspace / "pids", 1))


@needs_subreaper
@host_pids
async def test_what_leaves_the_group_is_gone_at_the_timeout(
    location: pegboard.Location, workspace: Path
) -> None:
    outcome = await call(
        location,
        "bash",
        command=f"{ESCAPES['setsid, TERM ignored']}\n{WRITTEN}; sleep 30",
        timeout=2,
    )
    assert metadata(outcome)["timed_out"]
    assert await gone(*await pids_in(workspace / "pids", 1))


@needs_subreaper
@host_pids
async def test_what_leaves_the_group_is_gone_when_the_call_is_cancelled(
    location: pegboard.Location, workspace: Path
) -> None:
    with anyio.fail_after(15):
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: call(location, "bash", command=f"{ESCAPES['setsid']} sleep 100")
            )
            pids = await pids_in(workspace / "pids", 1)
            group.cancel_scope.cancel()
    assert await gone(*pids)


async def test_the_exit_status_is_the_commands_own(location: pegboard.Location) -> None:
    """Under the subreaper, an exit code and a killing signal are reported as the shell's."""
    assert 7 == metadata(await call(location, "bash", command="exit 7"))["exit_code"]
    killed = metadata(await call(location, "bash", command="kill -KILL $$"))
    assert (None, "SIGKILL") == (killed["exit_code"], killed["signal"])


async def test_a_broken_pipe_ends_a_writer_quietly(location: pegboard.Location) -> None:
    """The command gets SIGPIPE's default action, as from a terminal: no error text."""
    outcome = await call(location, "bash", command="yes | head -c 5")
    assert "y\ny\ny\n\n(exit code 0)" == text(outcome)


@needs_subreaper
async def test_what_a_running_call_started_is_gone_when_the_location_closes(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A call still running when its Location closes is stopped, with all it started."""
    outcomes: list[pegboard.Outcome] = []

    async def run(location: pegboard.Location) -> None:
        outcomes.append(await call(location, "bash", command=f"{ESCAPES['setsid']} sleep 100"))

    with anyio.fail_after(15):
        async with anyio.create_task_group() as group:
            async with opened(host, workspace, storage_dir, sandbox="off") as location:
                group.start_soon(run, location)
                pids = await pids_in(workspace / "pids", 1)
            assert await gone(*pids)
    assert "SIGTERM" == metadata(outcomes[0])["signal"]


@host_pids
async def test_without_a_subreaper_the_status_pipe_never_holds_the_call(
    location: pegboard.Location, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no subreaper runs (other platforms), a process that left the group keeps the
    status pipe open with nothing written: the call still returns at once."""
    from pegboard.plugins_builtin import _shell

    monkeypatch.setattr(_shell, "_SUBREAPER", False)
    pids: list[int] = []
    try:
        # Popen returns once the child has left the group (setsid runs before exec);
        # it keeps every descriptor the shell had, the status pipe's among them.
        program = (
            "import subprocess; print(subprocess.Popen(['sleep', '5'], start_new_session=True,"
            " close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
        )
        outcome = await call(location, "bash", command=f'{sys.executable} -c "{program}" > pids')
        pids = await pids_in(workspace / "pids", 1)
        assert 0 == metadata(outcome)["exit_code"]
        # Returned while the process holding the pipe still runs: it did not wait for it.
        assert running(pids[0])
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


async def test_a_commands_folder_is_made_and_removed_off_the_event_loop(
    location: pegboard.Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's own temporary folder is made and removed (with all the command left in
    it) in a worker thread: the event loop runs other tasks meanwhile."""
    async with call_folders_held(monkeypatch) as steps:
        outcome = await call(location, "bash", command="echo ran")
    assert "ran\n\n(exit code 0)" == text(outcome)
    assert [("made", True), ("removed", True)] == [(step, ran) for step, _, ran in steps]
    assert not steps[0][1].exists()


async def test_a_cancelled_commands_folder_is_removed_too(
    location: pegboard.Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling a call still removes its command's temporary folder, off the event loop."""
    async with call_folders_held(monkeypatch) as steps:
        with anyio.move_on_after(1):
            await call(location, "bash", command="sleep 30")
            raise AssertionError("the call was cancelled")
    assert [("made", True), ("removed", True)] == [(step, ran) for step, _, ran in steps]
    assert not steps[0][1].exists()


@pytest.mark.parametrize("command", ["\0", "echo a\0b"])
async def test_a_nul_character_in_the_command_is_a_failure(
    location: pegboard.Location, command: str
) -> None:
    """A NUL character, which no command line can carry, is the call's failure with what to
    do, not a defect, though the schema accepts it (and every rule allows the command)."""
    assert (
        "the command holds a NUL character, which no command line can carry; remove it "
        "(printf '\\0' writes one)"
    ) == failure(await call(location, "bash", command=command))


async def test_a_command_past_the_systems_limit_is_a_failure_that_says_what_to_do(
    location: pegboard.Location,
) -> None:
    """A command line longer than the system lets one argument be (128 KiB on Linux) is
    the call's failure, naming the way around it."""
    said = failure(await call(location, "bash", command="echo " + "a" * 200_000))
    assert said.startswith("cannot start ")
    assert said.endswith(
        ": Argument list too long; write a long script to a file (the write tool) and run that file"
    )


async def test_a_locations_commands_beyond_its_slots_wait_their_turn(
    host: pegboard.Host, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most `Limits.running` commands of one Location run at once (two here, a share of
    the process's file descriptors by default): the others wait their turn, and all
    complete."""
    from pegboard.plugins_builtin import _shell

    monkeypatch.setattr(_shell, "_running_default", lambda: 2)
    command = "echo start >> log.txt; sleep 0.3; echo end >> log.txt"
    outcomes: list[pegboard.Outcome] = []

    async def run(index: int) -> None:
        outcomes.append(await call(location, "bash", context(), command=command))

    async with opened(host, workspace, storage_dir) as location, anyio.create_task_group() as tasks:
        for index in range(6):
            tasks.start_soon(run, index)
    assert all(isinstance(outcome, pegboard.Completed) for outcome in outcomes), outcomes
    running, most = 0, 0
    for line in (workspace / "log.txt").read_text().split():
        running += 1 if line == "start" else -1
        most = max(most, running)
    assert (6, 2) == (len(outcomes), most)


async def test_a_host_out_of_file_descriptors_is_a_failure_to_try_again(
    location: pegboard.Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that cannot start because the process has no file descriptors left is the
    call's failure saying so, not a defect."""
    import errno

    def exhausted() -> tuple[int, int]:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "pipe", exhausted)
    said = failure(await call(location, "bash", command="echo hi"))
    assert said == (
        "the command could not start: the host has too many files open (Too many open "
        "files); run fewer commands at once, or try again"
    )
