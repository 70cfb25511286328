"""Bounding model content, and the managed storage that retains what was cut."""

from __future__ import annotations

import datetime
import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from strategies import characters, content_items, output_limits, texts

import pegboard
from pegboard._bounding import bound_content, preview_text

pytestmark = pytest.mark.anyio

#: Function-scoped fixtures (the backend, a workspace) are safe to share
#: between examples here: every example makes its own storage directory.
examples = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ROOMY = pegboard.OutputLimits(max_lines=10**9, max_bytes=10**12)
SMALL = pegboard.OutputLimits(max_lines=8, max_bytes=1024)
MANAGED_NAME = re.compile(r"[A-Za-z0-9._-]+")


def within(text: str, limits: pegboard.OutputLimits) -> bool:
    """Whether ``text`` is within both limits, measured as the contract words it."""
    return (
        text.count("\n") + 1 <= limits.max_lines and len(text.encode("utf-8")) <= limits.max_bytes
    )


def split_preview(preview: str, original: str, path: Path) -> tuple[str, str, str]:
    """Split ``preview`` into the head, the marker line naming ``path``, and the tail."""
    at = preview.index(str(path))
    start = preview.rfind("\n", 0, at) + 1
    end = preview.index("\n", at)
    head, marker, tail = preview[:start], preview[start:end], preview[end + 1 :]
    if head and not original.startswith(head):
        # The head did not end a line: a newline was added to put the marker on its own.
        assert head.endswith("\n")
        head = head[:-1]
    return head, marker, tail


def check_preview(preview: str, original: str, limits: pegboard.OutputLimits, path: Path) -> None:
    """Assert ``preview`` is head, marker line naming ``path``, tail, within ``limits``."""
    assert preview.count("\n") + 1 <= limits.max_lines
    assert len(preview.encode("utf-8")) <= limits.max_bytes  # also: no lone surrogate
    head, _, tail = split_preview(preview, original, path)
    assert original.startswith(head)
    assert original.endswith(tail)
    assert len(head) + len(tail) < len(original)


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


def echo_tool(content: object) -> pegboard.Tool:
    async def execute(input: object, context: pegboard.ToolContext) -> object:
        return pegboard.ToolResponse(content=content)

    return pegboard.tool(description="Return fixed content.", execute=execute)


async def run_once(
    host: pegboard.Host,
    root: Path,
    tool: pegboard.Tool,
    context: pegboard.ToolContext,
    **options: Any,
) -> pegboard.Outcome:
    """Open a Location, register ``tool`` as ``big`` and call it once."""
    async with host.location(root, plugins=[], **options) as location:
        with location.tools.register({"big": tool}):
            request = location.prepare()
            return await request.execute(pegboard.ToolCall("big", "{}", context))


# Bounding


@given(text=texts, limits=output_limits, directory=st.text(characters, max_size=30))
@settings(max_examples=300, deadline=None)
def test_preview_is_within_both_limits(
    text: str, limits: pegboard.OutputLimits, directory: str
) -> None:
    """A preview of oversized text is head, marker, tail, within both limits."""
    assume(not within(text, limits))
    assume("/" not in directory and "\n" not in directory and "\0" not in directory)
    path = Path("/", directory or "managed", "tool-output-20250101T000000-0123456789abcdef.txt")
    check_preview(preview_text(text.encode("utf-8"), limits, path), text, limits, path)


@given(text=texts, limits=output_limits)
@example(text="a\nb\nc\ndddddddd\ne\nf\ng\nh\ni", limits=SMALL)
@settings(max_examples=300, deadline=None)
def test_marker_counts_the_bytes_it_hides(text: str, limits: pegboard.OutputLimits) -> None:
    """The marker names how many bytes of the text neither the head nor the tail shows."""
    assume(not within(text, limits))
    path = Path("/managed/tool-output-20250101T000000-0123456789abcdef.txt")
    head, marker, tail = split_preview(preview_text(text.encode(), limits, path), text, path)
    hidden = len(text.encode()) - len(head.encode()) - len(tail.encode())
    assert f"({hidden:,} bytes)" in marker


@given(items=content_items, limits=output_limits)
@examples
async def test_bound_content_retains_oversized_text_whole(
    items: list[pegboard.ContentItem], limits: pegboard.OutputLimits
) -> None:
    """Oversized text is saved whole and previewed in the first text's place; media stay."""
    joined = "\n".join(item.text for item in items if type(item) is pegboard.Text)
    with tempfile.TemporaryDirectory() as scratch:
        storage = pegboard.ManagedStorage(Path(scratch, "managed"))
        bounded = await bound_content(tuple(items), limits, storage)
        if within(joined, limits):
            assert tuple(items) == bounded.content
            assert () == bounded.managed
            assert [] == listing(storage.directory)
            return
        (path,) = bounded.managed
        assert [path.name] == listing(storage.directory)
        assert joined.encode("utf-8") == path.read_bytes()
    first = next(index for index, item in enumerate(items) if type(item) is pegboard.Text)
    preview = bounded.content[first]
    expected = [item for item in items[:first] if type(item) is not pegboard.Text]
    expected.append(preview)
    expected.extend(item for item in items[first:] if type(item) is not pegboard.Text)
    assert expected == list(bounded.content)
    assert isinstance(preview, pegboard.Text)
    check_preview(preview.text, joined, limits, path)


@pytest.mark.parametrize(
    ("parts", "bounded"),
    [
        (["a" * 128 + "\n" + "\n".join(["a" * 127] * 7)], False),
        (["a" * 129 + "\n" + "\n".join(["a" * 127] * 7)], True),
        (["\n".join(["a"] * 8)], False),
        (["\n".join(["a"] * 9)], True),
        (["a" * 512, "b" * 511], False),
        (["a" * 512, "b" * 512], True),
        (["\n".join(["a"] * 4), "\n".join(["b"] * 4)], False),
        (["\n".join(["a"] * 4), "\n".join(["b"] * 5)], True),
        (["é" * 512], False),
        (["é" * 511 + "abc"], True),
    ],
)
async def test_limits_are_inclusive_and_count_joined_parts(
    tmp_path: Path, parts: list[str], bounded: bool
) -> None:
    """Text of exactly max_lines lines and max_bytes UTF-8 bytes passes; one more is cut."""
    storage = pegboard.ManagedStorage(tmp_path / "managed")
    content = tuple(pegboard.Text(part) for part in parts)
    result = await bound_content(content, SMALL, storage)
    assert bounded == (content != result.content)
    assert bounded == bool(result.managed)
    assert len(result.managed) == len(listing(storage.directory))


async def test_media_keep_their_order_around_the_preview(tmp_path: Path) -> None:
    """Media pass unchanged in order; the preview takes the first text item's place."""
    storage = pegboard.ManagedStorage(tmp_path / "managed")
    picture = pegboard.Image(b"\x89PNG", "image/png")
    sound = pegboard.Audio(b"RIFF", "audio/wav")
    diagram = pegboard.Image(b"GIF89a", "image/gif")
    big = "\n".join(f"line {number}" for number in range(100))
    content = (picture, pegboard.Text(big), sound, pegboard.Text("small"), diagram)
    result = await bound_content(content, SMALL, storage)
    (path,) = result.managed
    assert (picture, sound, diagram) == result.content[:1] + result.content[2:]
    preview = result.content[1]
    assert isinstance(preview, pegboard.Text)
    check_preview(preview.text, f"{big}\nsmall", SMALL, path)
    assert f"{big}\nsmall".encode() == path.read_bytes()


async def test_preview_shows_the_first_and_last_lines(tmp_path: Path) -> None:
    """With short lines the preview spends its line budget on the head and the tail."""
    storage = pegboard.ManagedStorage(tmp_path / "managed")
    text = "\n".join(f"line {number}" for number in range(10_000))
    result = await bound_content((pegboard.Text(text),), pegboard.OutputLimits(), storage)
    (preview,) = result.content
    assert isinstance(preview, pegboard.Text)
    shown = preview.text.split("\n")
    marker = next(index for index, line in enumerate(shown) if "saved in" in line)
    head, tail = shown[:marker], shown[marker + 1 :]
    numbered = [f"line {number}" for number in range(10_000)]
    assert numbered[: len(head)] == head
    assert numbered[-len(tail) :] == tail
    assert len(head) >= 990
    assert len(tail) >= 990
    assert len(shown) <= 2000


# Managed storage


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
    (name,) = listing(storage_dir)
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
    assert [] == listing(storage_dir)


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


def plant(directory: Path, name: str, age: datetime.timedelta, link_to: Path | None = None) -> None:
    """Make a file (or a symlink to ``link_to``) in ``directory`` that is ``age`` old."""
    path = directory / name
    if link_to is None:
        path.write_bytes(b"data")
    else:
        path.symlink_to(link_to)
    when = time.time() - age.total_seconds()
    os.utime(path, (when, when), follow_symlinks=False)


async def test_prune_deletes_only_our_old_files(tmp_path: Path, storage_dir: Path) -> None:
    """prune() removes retained files past the retention and nothing else."""
    storage = pegboard.ManagedStorage(storage_dir, retention=datetime.timedelta(days=7))
    await anyio.Path(storage_dir).mkdir(mode=0o700)
    old, recent = datetime.timedelta(days=8), datetime.timedelta(days=6)
    outside = anyio.Path(tmp_path / "outside")
    await outside.write_bytes(b"kept")
    plant(storage_dir, "tool-output-20250101T000000-00000000000000aa.txt", old)
    kept = [
        "tool-output-20250101T000000-00000000000000aa.txt.bak",
        "tool-output-20250102T000000-00000000000000bb.txt",
        "tool-output-20250103T000000-00000000000000cc.txt",
        "tool-output-20250104T000000-00000000000000dd.txt",
        "zz-notes.txt",
    ]
    plant(storage_dir, kept[0], old)
    plant(storage_dir, kept[1], recent)
    plant(storage_dir, kept[2], old, link_to=Path(outside))
    await anyio.Path(storage_dir / kept[3]).mkdir()
    plant(storage_dir, kept[4], old)
    assert 1 == await storage.prune()
    assert kept == listing(storage_dir)
    assert b"kept" == await outside.read_bytes()


# End to end


async def test_oversized_content_is_previewed_and_retained(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """A call's oversized content comes back as a preview naming the file that holds it all."""
    text = "\n".join(f"row {number} ✓" for number in range(500))
    outcome = await run_once(
        host, workspace, echo_tool(text), context(), limits=SMALL, storage=storage_dir
    )
    assert isinstance(outcome, pegboard.Completed)
    (preview,) = outcome.content
    assert isinstance(preview, pegboard.Text)
    (name,) = listing(storage_dir)
    check_preview(preview.text, text, SMALL, storage_dir / name)
    assert text.encode("utf-8") == (storage_dir / name).read_bytes()


def reporter(text: str, *, with_content: bool) -> pegboard.Tool:
    async def execute(input: object, context: pegboard.ToolContext) -> object:
        output = {"text": text, "lines": text.split("\n")}
        return pegboard.ToolResponse(output=output, content=text if with_content else None)

    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "lines": {"type": "array"}},
        "required": ["text", "lines"],
    }
    return pegboard.tool(description="Report text.", execute=execute, output=schema)


@given(text=texts, limits=output_limits, with_content=st.booleans())
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
async def test_law_storage_encapsulation_output_ignores_limits(
    host: pegboard.Host,
    workspace: Path,
    context: Callable[..., pegboard.ToolContext],
    text: str,
    limits: pegboard.OutputLimits,
    with_content: bool,
) -> None:
    """Law 9: Completed.output is the same whatever the limits and retention did."""
    tool = reporter(text, with_content=with_content)
    with tempfile.TemporaryDirectory() as scratch:
        unbounded = await run_once(host, workspace, tool, context(), limits=ROOMY, storage=scratch)
        bounded = await run_once(host, workspace, tool, context(), limits=limits, storage=scratch)
    assert isinstance(unbounded, pegboard.Completed)
    assert isinstance(bounded, pegboard.Completed)
    assert {"text": text, "lines": text.split("\n")} == pegboard.thaw(bounded.output)
    assert unbounded.output == bounded.output


@pytest.mark.parametrize(
    "directory",
    ["/tmp/" + "d" * 600, "/tmp/two\nlines", "/tmp/tab\there"],
    ids=["long", "newline", "tab"],
)
def test_storage_directories_that_would_break_the_preview_are_refused(directory: str) -> None:
    """A storage path too long or not printable on one line is refused up front."""
    with pytest.raises(ValueError, match="printable path of at most 512 bytes"):
        pegboard.ManagedStorage(directory)


# Every model-visible text is bounded

HUGE = "\n".join(f"secret row {number}" for number in range(20_000))


def visible_text(outcome: pegboard.Outcome) -> list[str]:
    """Every text of ``outcome`` a model reads."""
    items = outcome.content if isinstance(outcome, pegboard.Completed) else outcome.partial
    found = [] if isinstance(outcome, pegboard.Completed) else [outcome.error.message]
    for item in items:
        if isinstance(item, pegboard.Text | pegboard.EmbeddedResource) and item.text is not None:
            found.append(item.text)
        elif isinstance(item, pegboard.ResourceLink) and item.description is not None:
            found.append(item.description)
    return found


async def fails_loudly(input: object, context: pegboard.ToolContext) -> object:
    raise pegboard.ToolFailure(HUGE)


async def reports_then_fails(input: object, context: pegboard.ToolContext) -> object:
    await context.progress(pegboard.Progress(content=HUGE))
    raise pegboard.ToolFailure("gave up")


async def embeds(input: object, context: pegboard.ToolContext) -> object:
    image = pegboard.Image(b"\x89PNG", "image/png")
    resource = pegboard.EmbeddedResource(uri="file:///log.txt", text=HUGE, mime_type="text/plain")
    return ["intro", resource, image]


async def links(input: object, context: pegboard.ToolContext) -> object:
    return pegboard.ResourceLink(uri="file:///log.txt", name="log", description=HUGE)


@pytest.mark.parametrize(
    "execute",
    [fails_loudly, reports_then_fails, embeds, links],
    ids=["failure-message", "partial", "embedded-resource", "link-description"],
)
async def test_law_canonical_representation_every_visible_text_is_bounded(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
    execute: Callable[..., Any],
) -> None:
    """Failure messages, partials, embedded text and link descriptions are all bounded."""
    tool = pegboard.tool(description="Loud.", execute=execute)
    outcome = await run_once(host, workspace, tool, context(), limits=SMALL, storage=storage_dir)
    (name,) = listing(storage_dir)
    saved = (storage_dir / name).read_text()
    assert HUGE in saved
    visible = visible_text(outcome)
    assert within("\n".join(visible), SMALL)
    assert any(str(storage_dir / name) in text for text in visible)
    if execute is embeds:
        assert isinstance(outcome, pegboard.Completed)
        kinds = [type(item) for item in outcome.content]
        assert [pegboard.Text, pegboard.ResourceLink, pegboard.Image] == kinds
        assert "file:///log.txt" == outcome.content[1].uri  # type: ignore[union-attr]
        assert f"intro\n{HUGE}" == saved
    if execute is links:
        link = outcome.content[1]  # type: ignore[union-attr]
        assert ("file:///log.txt", None) == (link.uri, link.description)  # type: ignore[union-attr]


async def test_law_canonical_representation_a_hooks_oversized_failure_is_bounded(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """A replacement Failed from a hook is bounded like the tool's own."""

    class Loud:
        @pegboard.hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome:
            return pegboard.Failed(pegboard.ToolError("tool_failure", HUGE))

    host.add_plugin("loud", Loud())
    tool = echo_tool("fine")
    async with host.location(workspace, plugins=["loud"], storage=storage_dir) as location:
        location.tools.register({"big": tool})
        outcome = await location.prepare().execute(pegboard.ToolCall("big", "{}", context()))
    assert isinstance(outcome, pegboard.Failed)
    assert within(outcome.error.message, pegboard.OutputLimits())
    (name,) = listing(storage_dir)
    assert HUGE == (storage_dir / name).read_text()


async def test_law_canonical_representation_bounding_does_not_wait_behind_busy_threads(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """With every default worker thread taken, oversized output is still bounded."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    borrowers = [object() for _ in range(int(limiter.total_tokens))]
    options: dict[str, Any] = {"plugins": [], "limits": SMALL, "storage": storage_dir}
    async with host.location(workspace, **options) as location:
        location.tools.register({"big": echo_tool(HUGE)})
        request = location.prepare()
        for borrower in borrowers:
            await limiter.acquire_on_behalf_of(borrower)
        try:
            with anyio.fail_after(10):
                outcome = await request.execute(pegboard.ToolCall("big", "{}", context()))
        finally:
            for borrower in borrowers:
                limiter.release_on_behalf_of(borrower)
    assert within("\n".join(visible_text(outcome)), SMALL)
    assert 1 == len(listing(storage_dir))
