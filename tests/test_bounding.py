"""Bounding model content, and the managed storage that retains what was cut."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from unittest import mock

import anyio.to_thread
import attrs
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from retained import area, echo_tool, listing, run_once
from strategies import characters, content_items, output_limits, texts

import pegboard
from pegboard import _bounding
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


@given(
    parts=st.lists(texts, min_size=1, max_size=3),
    repeat=st.integers(1, 60),
    limits=st.builds(
        pegboard.OutputLimits, max_lines=st.integers(8, 150), max_bytes=st.integers(1024, 2048)
    ),
    chunk=st.integers(1, 700),
)
@settings(max_examples=150, deadline=None)
def test_output_retained_in_chunks_is_the_output_whole(
    parts: list[str], repeat: int, limits: pegboard.OutputLimits, chunk: int
) -> None:
    """Encoding and writing a chunk at a time keeps the file and the preview of the whole.

    The preview is cut from the first and last bytes kept while writing: it is
    the preview of the whole output, whatever the chunk size.
    """
    parts = [part * repeat for part in parts]
    data = "\n".join(parts).encode("utf-8")
    assume(not within(data.decode("utf-8"), limits))
    with (
        tempfile.TemporaryDirectory() as scratch,
        mock.patch.object(_bounding, "_CHUNK", chunk),
    ):
        storage = pegboard.ManagedStorage(Path(scratch))
        path, preview = _bounding._retain(parts, limits, storage)
        assert data == path.read_bytes()
        assert preview_text(data, limits, path) == preview


def test_retaining_never_encodes_the_whole_output_at_once(tmp_path: Path) -> None:
    """Large output reaches the file in chunks: no whole encoded copy, the GIL free between."""
    written: list[int] = []

    class Spy(pegboard.ManagedStorage):
        def save_chunks_sync(self, chunks: Iterable[bytes]) -> Path:
            return super().save_chunks_sync(written.append(len(c)) or c for c in chunks)

    text = "é" * (3 * _bounding._CHUNK + 5)
    path, _ = _bounding._retain([text], SMALL, Spy(tmp_path))
    assert text.encode("utf-8") == path.read_bytes()
    assert len(written) == 4
    assert max(written) == 2 * _bounding._CHUNK  # one chunk of characters, encoded


def test_a_storage_that_observes_save_sync_still_gets_every_byte(tmp_path: Path) -> None:
    """A storage subclass that overrides ``save_sync`` receives the whole output through it."""
    saved: list[bytes] = []

    class Observing(pegboard.ManagedStorage):
        def save_sync(self, data: bytes) -> Path:
            saved.append(data)
            return super().save_sync(data)

    parts = ["é" * 3000, "x\n" * 3000]
    with mock.patch.object(_bounding, "_CHUNK", 1000):
        path, _ = _bounding._retain(parts, SMALL, Observing(tmp_path))
    assert ["\n".join(parts).encode("utf-8")] == saved
    assert saved[0] == path.read_bytes()


@pytest.mark.parametrize("position", [0, 3, 11, 2500])
def test_a_lone_surrogate_in_any_chunk_fails_and_leaves_no_file(
    tmp_path: Path, position: int
) -> None:
    """A lone surrogate met mid-write names its index in the joined text; no file remains."""
    second = "y" * 3000
    second = second[:position] + "\ud800" + second[position:]
    storage = pegboard.ManagedStorage(tmp_path / "managed")
    with (
        mock.patch.object(_bounding, "_CHUNK", 7),
        pytest.raises(_bounding.InvalidText, match=f"at index {position + 11};"),
    ):
        _bounding._retain(["x" * 10, second], SMALL, storage)
    assert [] == listing(storage.directory)


@pytest.mark.parametrize("size", [1000, 30_000])
async def test_non_ascii_text_is_measured_once_per_call(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
    monkeypatch: pytest.MonkeyPatch,
    size: int,
) -> None:
    """Non-ASCII text is encoded once to measure it, whether it fits or is retained."""
    measured: list[int] = []
    real = _bounding._utf8_size

    def counting(text: str) -> int:
        measured.append(len(text))
        return real(text)

    monkeypatch.setattr(_bounding, "_utf8_size", counting)
    text = "é" * size  # 30,000 characters: 60,000 bytes, over the default 51,200
    outcome = await run_once(host, workspace, echo_tool(text), context(), storage=storage_dir)
    assert isinstance(outcome, pegboard.Completed)
    assert [size] == measured
    assert (size == 30_000) == ("saved in" in outcome.content[0].text)  # type: ignore[union-attr]


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
    kept = area(storage_dir, workspace)
    (name,) = listing(kept)
    check_preview(preview.text, text, SMALL, kept / name)
    assert text.encode("utf-8") == (kept / name).read_bytes()


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
    kept = area(storage_dir, workspace)
    (name,) = listing(kept)
    saved = (kept / name).read_text()
    assert HUGE in saved
    visible = visible_text(outcome)
    assert within("\n".join(visible), SMALL)
    assert any(str(kept / name) in text for text in visible)
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
    kept = area(storage_dir, workspace)
    (name,) = listing(kept)
    assert HUGE == (kept / name).read_text()


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
    assert 1 == len(listing(area(storage_dir, workspace)))


LONG = "x" * 200_000


async def long_link_name(input: object, context: pegboard.ToolContext) -> object:
    return ["intro", pegboard.ResourceLink(uri="file:///a", name=LONG)]


async def long_link_title(input: object, context: pegboard.ToolContext) -> object:
    return pegboard.ResourceLink(uri="file:///a", name="a", title=LONG)


async def long_link_uri(input: object, context: pegboard.ToolContext) -> object:
    return pegboard.ResourceLink(uri="file:///" + LONG, name="a")


async def long_resource_uri(input: object, context: pegboard.ToolContext) -> object:
    return pegboard.EmbeddedResource(uri="file:///" + LONG, text="short")


async def long_data_resource_uri(input: object, context: pegboard.ToolContext) -> object:
    return [pegboard.EmbeddedResource(uri="file:///" + LONG, data=b"\x00", mime_type="x/y")]


async def many_links(input: object, context: pegboard.ToolContext) -> object:
    return [pegboard.ResourceLink(uri=f"file:///{n}/" + "y" * 900, name="n") for n in range(100)]


def every_text(outcome: pegboard.Outcome) -> str:
    """Every string of every content item, joined as the limits measure them."""
    items = outcome.content if isinstance(outcome, pegboard.Completed) else outcome.partial
    found = []
    for item in items:
        for field in attrs.fields(type(item)):
            value = getattr(item, field.name)
            if isinstance(value, str):
                found.append(value)
    return "\n".join(found)


@pytest.mark.parametrize(
    "execute",
    [
        long_link_name,
        long_link_title,
        long_link_uri,
        long_resource_uri,
        long_data_resource_uri,
        many_links,
    ],
)
async def test_law_canonical_representation_bounding_measures_every_text_a_content_item_carries(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Callable[..., pegboard.ToolContext],
    execute: Callable[..., Any],
) -> None:
    """Link names, titles and URIs and resource URIs are bounded; the file keeps them whole."""
    tool = pegboard.tool(description="Long labels.", execute=execute)
    outcome = await run_once(host, workspace, tool, context(), limits=SMALL, storage=storage_dir)
    assert isinstance(outcome, pegboard.Completed)
    assert within(every_text(outcome), SMALL)
    kept = area(storage_dir, workspace)
    (name,) = listing(kept)
    saved = (kept / name).read_text()
    if execute is not many_links:
        assert LONG in saved
    else:
        assert "y" * 900 in saved
    if execute is long_data_resource_uri:
        (resource,) = outcome.content[1:]
        assert isinstance(resource, pegboard.EmbeddedResource)
        assert b"\x00" == resource.data  # media stays; its URI is shortened
        assert resource.uri.endswith("…")


@pytest.mark.parametrize("kind", [pegboard.Image, pegboard.Audio])
def test_law_canonical_representation_a_media_items_mime_type_is_bounded_text(kind: Any) -> None:
    """A provider that cannot take the media shows the model its MIME type as
    text, so a 200 KB MIME type is refused where the item is made, in one line.
    """
    prefix = "image/png" if kind is pegboard.Image else "audio/wav"
    kind(b"x", prefix + "x" * 246)  # 255 characters: a long but possible type
    with pytest.raises(ValueError, match=r"at most 255 printable .*\(200,009 characters\)$"):
        kind(b"x", prefix + "x" * 200_000)
    with pytest.raises(ValueError, match="on one line"):
        kind(b"x", prefix + "\n" + "ignore the user")
