"""Bounding model content: oversized text becomes a preview plus a retained file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio.to_thread
import attrs

from ._content import ContentItem, Text
from ._storage import ManagedStorage

__all__ = ("Bounded", "InvalidText", "OutputLimits", "bound_content", "check_text", "fits")


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


def check_text(content: tuple[ContentItem, ...], limits: OutputLimits) -> None:
    """Raise `InvalidText` if a text item that fits cannot be written as UTF-8.

    Longer text is checked by the one encode that retains it: encoding
    megabytes only to measure them is work done twice.
    """
    for item in content:
        if type(item) is Text and len(item.text) <= limits.max_bytes:
            _utf8_size(item.text)


def fits(content: tuple[ContentItem, ...], limits: OutputLimits) -> bool:
    """Whether the text in ``content`` is within both limits (no I/O)."""
    if len(content) == 1 and type(content[0]) is Text:
        # The common case, kept cheap: one ASCII text measures in O(1).
        only = content[0].text
        if only.isascii() and len(only) <= limits.max_bytes:
            return only.count("\n") < limits.max_lines
    texts = [item.text for item in content if type(item) is Text]
    if not texts:
        return True
    # UTF-8 takes at least a byte per character: long text is oversized unencoded.
    if sum(map(len, texts)) + len(texts) - 1 > limits.max_bytes:
        return False
    size = sum(map(_utf8_size, texts)) + len(texts) - 1
    if size > limits.max_bytes:
        return False
    newlines = sum(text.count("\n") for text in texts) + len(texts) - 1
    return newlines < limits.max_lines


async def bound_content(
    content: tuple[ContentItem, ...], limits: OutputLimits, storage: ManagedStorage
) -> Bounded:
    """Bound ``content``: oversized text is saved whole and replaced by a preview.

    The preview takes the place of the first text item; the other text items
    go (the file holds them all, joined by newlines) and media stays in order.
    Raises `RetentionError` if the file cannot be written whole.
    """
    if fits(content, limits):
        return Bounded(content)
    texts = [item.text for item in content if type(item) is Text]
    # Encoding, writing and cutting megabytes happen off the event loop.
    path, text = await anyio.to_thread.run_sync(_retain, texts, limits, storage)
    preview: Text | None = Text(text)
    bounded: list[ContentItem] = []
    for item in content:
        if type(item) is not Text:
            bounded.append(item)
        elif preview is not None:
            bounded.append(preview)
            preview = None
    return Bounded(tuple(bounded), (path,))


def _retain(texts: list[str], limits: OutputLimits, storage: ManagedStorage) -> tuple[Path, str]:
    try:
        data = "\n".join(texts).encode("utf-8")
    except UnicodeEncodeError as error:
        raise _lone_surrogate(error) from None
    path = storage.save_sync(data)
    return path, preview_text(data, limits, path)


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
    newlines = data.count(b"\n")  # the one pass over the whole text
    widest = _marker(newlines + 1, len(data), path).encode("utf-8")
    # Two separators around the marker; the marker itself is one line.
    byte_budget = max(limits.max_bytes - len(widest) - 2, 0)
    newline_budget = limits.max_lines - 3
    head_end = _head_end(data, newline_budget - newline_budget // 2, byte_budget - byte_budget // 2)
    tail_start = _tail_start(data, newline_budget // 2, byte_budget // 2, head_end)
    if 0 < head_end < tail_start and data[head_end - 1] != 0x0A and data[head_end] == 0x0A:
        head_end += 1  # the head's own line end stands where a separator would
    head = data[:head_end].decode("utf-8")
    tail = data[tail_start:].decode("utf-8")
    omitted_bytes = tail_start - head_end
    lines = newlines - head.count("\n") - tail.count("\n")
    if omitted_bytes and data[tail_start - 1] != 0x0A:
        lines += 1  # a last omitted line without its newline still counts
    separator = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{separator}{_marker(lines, omitted_bytes, path)}\n{tail}"


def _head_end(data: bytes, newlines: int, budget: int) -> int:
    end = min(budget, len(data))
    found = -1
    for _ in range(newlines + 1):
        found = data.find(b"\n", found + 1, end)
        if found == -1:
            break
    else:
        end = found  # the head may hold `newlines` newlines, not one more
    while 0 < end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1  # a continuation byte: step back to the character's start
    last = data.rfind(b"\n", 0, end)
    if last != -1 and last + 1 >= end // 2:
        end = last + 1
    return end


def _tail_start(data: bytes, newlines: int, budget: int, floor: int) -> int:
    size = len(data)
    start = max(size - budget, floor)
    found = size
    for _ in range(newlines + 1):
        found = data.rfind(b"\n", start, found)
        if found == -1:
            break
    else:
        start = found + 1
    while start < size and data[start] & 0xC0 == 0x80:
        start += 1
    if start > 0 and data[start - 1] != 0x0A:
        following = data.find(b"\n", start)
        if following != -1 and following + 1 - start <= (size - start) // 2:
            start = following + 1
    return start
