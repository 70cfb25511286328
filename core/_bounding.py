"""Bounding model content: oversized text becomes a preview plus a retained file."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs

from ._content import ContentItem, EmbeddedResource, ResourceLink, Text
from ._storage import ManagedStorage

_new, _set = object.__new__, object.__setattr__

__all__ = (
    "BOUNDING_THREADS",
    "Bounded",
    "InvalidText",
    "OutputLimits",
    "bound_content",
    "bound_text",
    "bounding_limiter",
    "fits",
)

#: Worker threads that bound output at once, per event loop. Bounding has
#: threads of its own so a result never waits behind busy sync tools in the
#: default thread pool.
BOUNDING_THREADS = 4
_LIMITER: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar(
    "pegboard_bounding_limiter"
)


def bounding_limiter() -> anyio.CapacityLimiter:
    """The current event loop's limiter for bounding threads."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(BOUNDING_THREADS)
        _LIMITER.set(limiter)
        return limiter


def _at_least(minimum: int) -> Callable[[object, attrs.Attribute[int], object], None]:
    def check(_: object, attribute: attrs.Attribute[int], value: object) -> None:
        if type(value) is not int or value < minimum:
            raise ValueError(f"{attribute.name} must be an integer >= {minimum}, got {value!r}")

    return check


@attrs.frozen
class OutputLimits:
    """How much model content one call may publish.

    Only text is measured: all text parts together, joined by newlines, must
    stay within ``max_lines`` and ``max_bytes`` (UTF-8). Media passes unchanged.
    Metadata is measured on its own against ``max_metadata_bytes``.
    """

    max_lines: int = attrs.field(default=2000, validator=_at_least(8))
    max_bytes: int = attrs.field(default=51_200, validator=_at_least(1024))
    max_metadata_bytes: int = attrs.field(default=16_384, validator=_at_least(0))


class InvalidText(ValueError):  # noqa: N818 - reads as what it is
    """Content text that cannot be written as UTF-8 (it holds a lone surrogate)."""


@attrs.frozen
class Bounded:
    """Content within the limits, and the managed files that hold what was cut."""

    content: tuple[ContentItem, ...]
    managed: tuple[Path, ...] = ()


def _utf8_size(text: str) -> int:
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise _lone_surrogate(error) from None


def _lone_surrogate(error: UnicodeEncodeError) -> InvalidText:
    return InvalidText(
        f"content text holds a lone UTF-16 surrogate at index {error.start}; "
        "decode bytes with errors='replace' before returning them"
    )


def _text_of(item: ContentItem) -> str | None:
    """The body text an item carries, if any: what a cut retains."""
    kind = type(item)
    if kind is Text:
        return item.text  # type: ignore[union-attr]
    if kind is EmbeddedResource:
        return item.text  # type: ignore[union-attr]
    if kind is ResourceLink:
        return item.description  # type: ignore[union-attr]
    return None


def _labels(item: ContentItem) -> list[str]:
    """The other text a link or an embedded resource carries: the model reads it too."""
    if type(item) is ResourceLink:
        found = [item.uri, item.name, item.title, item.mime_type]
    elif type(item) is EmbeddedResource:
        found = [item.uri, item.mime_type]
    else:
        return []
    return [label for label in found if label is not None]


def _texts(content: tuple[ContentItem, ...]) -> list[str]:
    return [text for text in map(_text_of, content) if text is not None]


def _measured(content: tuple[ContentItem, ...]) -> list[str]:
    """Every text of ``content`` the model reads: bodies and labels, item by item."""
    found: list[str] = []
    for item in content:
        labels = _labels(item)
        if labels:
            found.append(" ".join(labels))  # one line, as providers show a link
        text = _text_of(item)
        if text is not None:
            found.append(text)
    return found


#: In a cut, a link keeps its labels (URI, name, title, MIME type) only when
#: they are this short, on one line, and all kept labels stay within a quarter
#: of the limits; longer labels are retained with the text they came with.
_LABEL_BYTES = 1024


def fits(content: tuple[ContentItem, ...], limits: OutputLimits) -> bool:
    """Whether the text in ``content`` is within both limits (no I/O).

    Text items, the text of embedded resources, the descriptions of resource
    links and the URIs, names, titles and MIME types of links and embedded
    resources are all text the model reads, measured together.
    """
    if len(content) == 1 and type(content[0]) is Text:
        # The common case, kept cheap: one ASCII text measures in O(1).
        only = content[0].text
        if only.isascii() and len(only) <= limits.max_bytes:
            # Fewer characters than max_lines cannot hold max_lines newlines.
            return len(only) < limits.max_lines or only.count("\n") < limits.max_lines
    return _within(_measured(content), limits.max_bytes, limits.max_lines)


def _within(texts: list[str], max_bytes: int, max_lines: int) -> bool:
    if not texts:
        return True
    # UTF-8 takes at least a byte per character: long text is oversized unencoded.
    if sum(map(len, texts)) + len(texts) - 1 > max_bytes:
        return False
    size = sum(map(_utf8_size, texts)) + len(texts) - 1
    if size > max_bytes:
        return False
    newlines = sum(text.count("\n") for text in texts) + len(texts) - 1
    return newlines < max_lines


def _kept_labels(
    content: tuple[ContentItem, ...], limits: OutputLimits
) -> tuple[set[int], int, int]:
    """Which items keep their labels in a cut (by index), and the bytes and lines they take."""
    kept: set[int] = set()
    size = lines = 0
    for index, item in enumerate(content):
        labels = _labels(item)
        if not labels:
            continue
        if type(item) is EmbeddedResource and _text_of(item) is not None:
            labels.append(item.uri)  # kept as a link named by its URI
        own = _utf8_size(" ".join(labels)) + 1
        if (
            own <= _LABEL_BYTES
            and not any("\n" in label for label in labels)
            and size + own <= limits.max_bytes // 4
            and lines < limits.max_lines // 4
        ):
            kept.add(index)
            size += own
            lines += 1
        elif _text_of(item) is None and type(item) is EmbeddedResource:
            # Data is media and stays; its URI is retained and shown shortened.
            shown = [_shortened(labels[0]), *labels[1:]]
            size += _utf8_size(" ".join(shown).replace("\n", " ")) + 1
            lines += 1
    return kept, size, lines


def _shortened(uri: str) -> str:
    """A long or multi-line URI's head, marked as cut (the whole URI is in the file)."""
    head = uri.split("\n", 1)[0][: _LABEL_BYTES // 4]
    while _utf8_size(head) > _LABEL_BYTES // 4:
        head = head[:-1]
    return head + "…"


async def bound_content(
    content: tuple[ContentItem, ...],
    limits: OutputLimits,
    storage: ManagedStorage,
    *,
    fitting: bool | None = None,
) -> Bounded:
    """Bound ``content``: oversized text is saved whole and replaced by a preview.

    All model-visible text is measured together: text items, embedded
    resources' text, resource links' descriptions, and the URIs, names, titles
    and MIME types of links and embedded resources. When it is over the
    limits, the file holds the text, joined by newlines, and the preview (a
    text item) takes the place of the first item whose text was cut. Other text
    items go; an embedded resource's text is replaced by a link to its URI; a
    link loses its description; media stay in order. A link or resource whose
    labels are long (over 1 KiB, or on several lines) goes too, its labels
    retained in the file with its text. The preview keeps the content
    annotations of the items it stands for when they all have the same.
    ``fitting`` is what `fits` already said of ``content``, to skip measuring again.
    Raises `InvalidText` if text cannot be written as UTF-8 and `RetentionError`
    if the file cannot be written whole.
    """
    if fitting if fitting is not None else fits(content, limits):
        return Bounded(content)
    kept, label_bytes, label_lines = _kept_labels(content, limits)
    cut: list[ContentItem] = []  # the items whose text (or labels) the file holds
    retained: list[str] = []
    for index, item in enumerate(content):
        text = _text_of(item)
        labels = [] if index in kept else _labels(item)
        if text is None and not labels:
            continue
        cut.append(item)
        if labels:
            retained.append(" ".join(labels))
        if text is not None:
            retained.append(text)
    # The preview leaves room for the labels that stay.
    room = _new(OutputLimits)
    _set(room, "max_lines", max(limits.max_lines - label_lines, 4))
    _set(room, "max_bytes", max(limits.max_bytes - label_bytes, 0))
    _set(room, "max_metadata_bytes", limits.max_metadata_bytes)
    path, text = await _retained(retained, room, storage)
    # The preview stands for every text it cut: it keeps their annotations
    # (audience, priority) only when they all agree.
    annotations = {item.annotations for item in cut}
    shared = annotations.pop() if len(annotations) == 1 else None
    preview: Text | None = Text(text, annotations=shared)
    bounded: list[ContentItem] = []
    for index, item in enumerate(content):
        carries = _text_of(item) is not None
        if (carries or (_labels(item) and index not in kept)) and preview is not None:
            bounded.append(preview)
            preview = None
        if _labels(item) and index not in kept:
            if isinstance(item, EmbeddedResource) and not carries:
                bounded.append(attrs.evolve(item, uri=_shortened(item.uri)))
            continue  # its labels are in the file
        if isinstance(item, EmbeddedResource) and carries:
            bounded.append(
                ResourceLink(
                    uri=item.uri,
                    name=item.uri,
                    mime_type=item.mime_type,
                    annotations=item.annotations,
                )
            )
        elif isinstance(item, ResourceLink) and carries:
            bounded.append(attrs.evolve(item, description=None))
        elif type(item) is not Text:
            bounded.append(item)
    return Bounded(tuple(bounded), (path,))


async def bound_text(
    text: str, limits: OutputLimits, storage: ManagedStorage
) -> tuple[str, Path | None]:
    """One model-visible text (an error message) within the limits, and its file if cut."""
    if fits((Text(text),), limits):
        return text, None
    path, preview = await _retained([text], limits, storage)
    return preview, path


async def _retained(
    texts: list[str], limits: OutputLimits, storage: ManagedStorage
) -> tuple[Path, str]:
    # Encoding, writing and cutting megabytes happen off the event loop, on
    # bounding's own threads. The thread is not abandoned on cancellation: the
    # caller must learn the file's path to delete it.
    path, text = await anyio.to_thread.run_sync(
        _retain, texts, limits, storage, limiter=bounding_limiter()
    )
    return path, text


#: Characters encoded and written at a time. Chunks keep the GIL free between
#: them (the event loop runs while a large output is retained) and need no
#: whole encoded copy; a few hundred kilobytes stay below the allocator's
#: mmap threshold after the first one, so the buffers are reused, not faulted in.
_CHUNK = 1 << 18


@attrs.define
class _Sample:
    """What a preview needs of retained bytes: the head, the tail, the size, the newlines."""

    keep: int
    head: bytearray = attrs.Factory(bytearray)
    recent: collections.deque[bytes] = attrs.Factory(collections.deque)
    recent_size: int = 0
    size: int = 0
    newlines: int = 0

    def add(self, chunk: bytes) -> bytes:
        self.size += len(chunk)
        self.newlines += chunk.count(b"\n")
        if len(self.head) < self.keep:
            self.head += chunk[: self.keep - len(self.head)]
        self.recent.append(chunk)
        self.recent_size += len(chunk)
        while self.recent_size - len(self.recent[0]) >= self.keep:
            self.recent_size -= len(self.recent.popleft())
        return chunk

    def tail(self) -> bytes:
        return b"".join(self.recent)[-self.keep :]


def _encoded(texts: list[str], sample: _Sample) -> Iterator[bytes]:
    """The texts joined by newlines, as UTF-8 chunks, each noted in ``sample``."""
    offset = 0
    for index, text in enumerate(texts):
        if index:
            yield sample.add(b"\n")
            offset += 1
        for start in range(0, len(text), _CHUNK):
            try:
                chunk = text[start : start + _CHUNK].encode("utf-8")
            except UnicodeEncodeError as error:
                error.start += offset + start  # the index in the joined text
                raise _lone_surrogate(error) from None
            yield sample.add(chunk)
        offset += len(text)


def _retain(texts: list[str], limits: OutputLimits, storage: ManagedStorage) -> tuple[Path, str]:
    # Head and tail need max_bytes + 1 bytes: the cuts look one byte past their budget.
    sample = _Sample(limits.max_bytes + 1)
    if type(storage).save_sync is not ManagedStorage.save_sync:
        # A storage that observes save_sync gets the whole bytes, as it always has.
        path = storage.save_sync(b"".join(_encoded(texts, sample)))
    else:
        path = storage.save_chunks_sync(_encoded(texts, sample))
    if sample.size <= sample.keep:  # the head holds it all: no second copy for the tail
        data = bytes(sample.head)
        return path, _preview(data, data, 0, sample.size, sample.newlines, limits, path)
    tail = sample.tail()
    return path, _preview(
        bytes(sample.head),
        tail,
        sample.size - len(tail),
        sample.size,
        sample.newlines,
        limits,
        path,
    )


def _marker(omitted_lines: int, omitted_bytes: int, path: Path) -> str:
    return (
        f"[… {omitted_lines:,} lines ({omitted_bytes:,} bytes) omitted; "
        f"the full output is saved in {path} …]"
    )


def preview_text(data: bytes, limits: OutputLimits, path: Path) -> str:
    """Head, omission marker, tail: within both limits, never splitting a character.

    The marker sits on its own line between the head and the tail. Cuts prefer
    line boundaries when one is near.
    """
    return _preview(data, data, 0, len(data), data.count(b"\n"), limits, path)


def _preview(
    head: bytes,
    tail: bytes,
    offset: int,
    size: int,
    newlines: int,
    limits: OutputLimits,
    path: Path,
) -> str:
    """`preview_text` of ``size`` bytes holding ``newlines`` newlines, from two samples.

    ``head`` starts the data and ``tail`` ends it, starting at ``offset``; each
    is at least ``max_bytes + 1`` long (or the whole data): every cut lies
    within its own sample.
    """
    widest = _marker(newlines + 1, size, path).encode("utf-8")
    # Two separators around the marker; the marker itself is one line.
    byte_budget = max(limits.max_bytes - len(widest) - 2, 0)
    newline_budget = limits.max_lines - 3
    head_end = _head_end(
        head, size, newline_budget - newline_budget // 2, byte_budget - byte_budget // 2
    )
    tail_start = offset + _tail_start(
        tail, offset, size, newline_budget // 2, byte_budget // 2, head_end
    )
    if 0 < head_end < tail_start and head[head_end - 1] != 0x0A and head[head_end] == 0x0A:
        head_end += 1  # the head's own line end stands where a separator would
    shown_head = head[:head_end].decode("utf-8")
    shown_tail = tail[tail_start - offset :].decode("utf-8")
    omitted_bytes = tail_start - head_end
    lines = newlines - shown_head.count("\n") - shown_tail.count("\n")
    if omitted_bytes and tail[tail_start - offset - 1] != 0x0A:
        lines += 1  # a last omitted line without its newline still counts
    separator = "" if not shown_head or shown_head.endswith("\n") else "\n"
    return f"{shown_head}{separator}{_marker(lines, omitted_bytes, path)}\n{shown_tail}"


def _head_end(data: bytes, size: int, newlines: int, budget: int) -> int:
    end = min(budget, size)
    found = -1
    for _ in range(newlines + 1):
        found = data.find(b"\n", found + 1, end)
        if found == -1:
            break
    else:
        end = found  # the head may hold `newlines` newlines, not one more
    while 0 < end < size and data[end] & 0xC0 == 0x80:
        end -= 1  # a continuation byte: step back to the character's start
    last = data.rfind(b"\n", 0, end)
    if last != -1 and last + 1 >= end // 2:
        end = last + 1
    return end


def _tail_start(data: bytes, offset: int, size: int, newlines: int, budget: int, floor: int) -> int:
    """Where the tail starts in ``data``, which holds the bytes from ``offset`` to the end."""
    length = len(data)
    start = max(size - budget, floor) - offset
    found = length
    for _ in range(newlines + 1):
        found = data.rfind(b"\n", start, found)
        if found == -1:
            break
    else:
        start = found + 1
    while start < length and data[start] & 0xC0 == 0x80:
        start += 1
    if start + offset > 0 and data[start - 1] != 0x0A:
        following = data.find(b"\n", start)
        if following != -1 and following + 1 - start <= (length - start) // 2:
            start = following + 1
    return start
