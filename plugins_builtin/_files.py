"""The read, write and edit tools: text files inside the Location."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread
import attrs

import pegboard

from ._paths import ask_about_path, failure, resolve
from ._text import HEAD_BYTES, binary_reason, clip

__all__ = ("EditInput", "Files", "ReadInput", "WriteInput")

#: One page of ``read`` stays within the default output limits (2,000 lines,
#: 51,200 bytes), so paging is the tool's, not a cut made by bounding.
PAGE_LINES = 2000
PAGE_BYTES = 50_000
#: Characters of one line shown; longer lines are cut with a note.
LINE_CHARACTERS = 2000
# Bytes read for one line before the rest is skipped: enough for any
# LINE_CHARACTERS characters of UTF-8.
_LINE_READ = LINE_CHARACTERS * 4 + 1
_SKIP_READ = 1 << 16
# Lines before a page are counted a block at a time, then found within a
# stretch of the block that holds the page's first line.
_COUNT_BLOCK = 1 << 20
_COUNT_STRETCH = 1 << 14


@attrs.frozen
class ReadInput:
    path: str = attrs.field(
        metadata={
            "description": "The file to read: relative to the Location root, or absolute "
            "inside it (saved tool output files are readable too)."
        }
    )
    offset: int = attrs.field(
        default=1, metadata={"description": "The first line to show, counting from 1."}
    )
    limit: int = attrs.field(
        default=PAGE_LINES, metadata={"description": "How many lines to show at most."}
    )


@attrs.frozen
class WriteInput:
    path: str = attrs.field(
        metadata={"description": "The file to write, relative to the Location root."}
    )
    content: str = attrs.field(metadata={"description": "The file's complete new text."})


@attrs.frozen
class EditInput:
    path: str = attrs.field(
        metadata={"description": "The file to change, relative to the Location root."}
    )
    old_string: str = attrs.field(
        metadata={
            "description": "The exact text to replace, including whitespace and indentation "
            "(without the line-number prefix read shows)."
        }
    )
    new_string: str = attrs.field(metadata={"description": "The text to put in its place."})
    replace_all: bool = attrs.field(
        default=False,
        metadata={"description": "Replace every occurrence instead of exactly one."},
    )


#: Tools that only look: safe to repeat, nothing outside the Location.
READS = pegboard.ToolAnnotations(read_only=True, idempotent=True, open_world=False)

READ = """Read a text file inside the Location, with line numbers (like `cat -n`).

Shows up to `limit` lines (2,000 by default) from line `offset` (1 by default), and at most
about 50 KB per page; the last line says where the next page starts. Lines longer than
2,000 characters are cut. Binary files are refused. Saved tool output files (named when a
result was too long to show whole) can be read and paged the same way."""

WRITE = """Write a text file inside the Location, replacing it whole if it exists.

Creates missing parent folders. The file is replaced atomically, so no reader ever sees it
half-written. Prefer edit for changing part of an existing file."""

EDIT = """Replace exact text in a file inside the Location.

`old_string` must match the file exactly, once (or set `replace_all`). Copy it from read's
output without the line-number prefix. Fails, changing nothing, when `old_string` is
missing or matches more than once."""


@attrs.frozen
class _Page:
    lines: list[str]
    first: int
    last: int
    more: bool
    cut_lines: int
    byte_limited: bool


class Files:
    """The file tools of one Location, capturing its trusted services."""

    def __init__(self, filesystem: pegboard.Filesystem, permissions: pegboard.Permissions) -> None:
        self._filesystem = filesystem
        self._permissions = permissions

    def tools(self) -> dict[str, pegboard.Tool]:
        """The tools by authored name."""
        return {
            "read": pegboard.tool(
                description=READ,
                execute=self.read,
                input=ReadInput,
                title="Read a file",
                annotations=READS,
            ),
            "write": pegboard.tool(
                description=WRITE,
                execute=self.write,
                input=WriteInput,
                title="Write a file",
                annotations=pegboard.ToolAnnotations(
                    read_only=False, destructive=True, idempotent=True, open_world=False
                ),
            ),
            "edit": pegboard.tool(
                description=EDIT,
                execute=self.edit,
                input=EditInput,
                title="Edit a file",
                annotations=pegboard.ToolAnnotations(
                    read_only=False, destructive=True, idempotent=False, open_world=False
                ),
            ),
        }

    async def read(
        self, input: ReadInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        if input.offset < 1:
            raise pegboard.ToolFailure(
                f"offset counts lines from 1; got {input.offset} (use 1 for the first line)"
            )
        if input.limit < 1:
            raise pegboard.ToolFailure(f"limit is a number of lines, 1 or more; got {input.limit}")
        real = resolve(self._filesystem, input.path)
        shown = self._filesystem.relative(real)
        await ask_about_path(
            self._permissions,
            "read",
            shown,
            directory=False,
            metadata={"tool": "read", "path": shown},
        )
        page = await anyio.to_thread.run_sync(self._open_page, real, shown, input)
        metadata: dict[str, Any] = {
            "path": shown,
            "first_line": page.first,
            "lines": len(page.lines),
        }
        if page.cut_lines:
            metadata["cut_lines"] = page.cut_lines
        if not page.lines:
            return pegboard.ToolResponse(content=f"({shown} is empty)", metadata=metadata)
        text = "\n".join(page.lines)
        if page.more:
            stop = " (pages stop at about 50 KB)" if page.byte_limited else ""
            text += f"\n(more lines follow{stop}; read on with offset={page.last + 1})"
            metadata["next_offset"] = page.last + 1
        return pegboard.ToolResponse(content=text, metadata=metadata)

    def _open_page(self, real: Path, shown: str, input: ReadInput) -> _Page:
        try:
            descriptor = self._filesystem.open_read(real)
        except OSError as error:
            raise failure(error, input.path, self._filesystem) from None
        return _read_page(descriptor, shown, input.offset, input.limit)

    async def write(
        self, input: WriteInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        real = resolve(self._filesystem, input.path, write=True)
        shown = self._filesystem.relative(real)
        data = input.content.encode("utf-8")
        await ask_about_path(
            self._permissions,
            "edit",
            shown,
            directory=False,
            metadata={"tool": "write", "path": shown, "content": input.content},
        )
        try:
            existed = await anyio.Path(real).exists()
            await self._filesystem.write_bytes(real, data)
        except OSError as error:
            raise failure(error, input.path, self._filesystem) from None
        lines = input.content.count("\n") + (not input.content.endswith("\n") and bool(data))
        verb = "Replaced" if existed else "Created"
        noun = "line" if lines == 1 else "lines"
        return pegboard.ToolResponse(
            content=f"{verb} {shown} ({len(data):,} bytes, {lines:,} {noun})",
            metadata={"path": shown, "bytes": len(data), "created": not existed},
        )

    async def edit(
        self, input: EditInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        if not input.old_string:
            raise pegboard.ToolFailure(
                "old_string is empty; give the exact text to replace (use write to create a file)"
            )
        if input.old_string == input.new_string:
            raise pegboard.ToolFailure("old_string and new_string are the same; nothing to change")
        real = resolve(self._filesystem, input.path, write=True)
        shown = self._filesystem.relative(real)
        # Permission first: a refused edit must not reveal whether the text is there.
        await ask_about_path(
            self._permissions,
            "edit",
            shown,
            directory=False,
            metadata={
                "tool": "edit",
                "path": shown,
                "old_string": input.old_string,
                "new_string": input.new_string,
                "replace_all": input.replace_all,
            },
        )
        try:
            data = await self._filesystem.read_bytes(real)
        except OSError as error:
            raise failure(error, input.path, self._filesystem) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise pegboard.ToolFailure(
                f"{shown} is not UTF-8 text (invalid byte at {error.start}); edit changes text "
                "files only"
            ) from None
        old, new = input.old_string, input.new_string
        count = text.count(old)
        if not count and "\r\n" in text:
            # read shows lines without their "\r"; match what the model saw.
            old, new = _crlf(old), _crlf(new)
            count = text.count(old)
        if not count:
            raise pegboard.ToolFailure(
                f"old_string was not found in {shown}; read the file and copy the text exactly, "
                "including whitespace and indentation"
            )
        if count > 1 and not input.replace_all:
            raise pegboard.ToolFailure(
                f"old_string appears {count} times in {shown}; include more surrounding lines "
                "to make it unique, or set replace_all to replace all of them"
            )
        line = text.count("\n", 0, text.index(old)) + 1
        changed = text.replace(old, new) if input.replace_all else text.replace(old, new, 1)
        try:
            await self._filesystem.write_bytes(real, changed.encode("utf-8"))
        except OSError as error:
            raise failure(error, input.path, self._filesystem) from None
        replaced = count if input.replace_all else 1
        noun = "occurrence" if replaced == 1 else "occurrences"
        return pegboard.ToolResponse(
            content=f"Edited {shown}: replaced {replaced} {noun} (the first at line {line})",
            metadata={"path": shown, "replacements": replaced, "line": line},
        )


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _read_page(descriptor: int, shown: str, offset: int, limit: int) -> _Page:
    """One page of numbered lines from the open file ``descriptor`` (closed here).

    Reads line by line, so a page costs the lines before it, never the whole file.
    """
    with os.fdopen(descriptor, "rb") as file:
        head = file.read(HEAD_BYTES)
        reason = binary_reason(head, complete=len(head) < HEAD_BYTES)
        if reason is not None:
            raise pegboard.ToolFailure(
                f"{shown} looks like a binary file ({reason} in its first {HEAD_BYTES:,} "
                "bytes); read shows text files only"
            )
        file.seek(0)
        lines: list[str] = []
        wanted = min(limit, PAGE_LINES)
        number = _skip_lines(file, offset - 1)
        size = cut = 0
        more = byte_limited = False
        while raw := file.readline(_LINE_READ):
            number += 1
            length = len(raw)
            whole = raw.endswith(b"\n") or length < _LINE_READ
            while not whole:  # skip the rest of an overlong line without keeping it
                rest = file.readline(_SKIP_READ)
                length += len(rest)
                whole = not rest or rest.endswith(b"\n")
            if number < offset:
                continue
            if len(lines) == wanted:
                more = True
                break
            text = raw.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")
            if length >= _LINE_READ or len(text) > LINE_CHARACTERS:
                cut += 1
                whole_length = None if length < _LINE_READ else f"{length:,} bytes"
                text = clip(text, LINE_CHARACTERS, length=whole_length)
            entry = f"{number:6}\t{text}"
            size += len(entry.encode("utf-8")) + 1
            if lines and size > PAGE_BYTES:
                more = byte_limited = True
                break
            lines.append(entry)
    if number < offset and number:
        raise pegboard.ToolFailure(
            f"offset {offset} is past the end of {shown}, which has {number:,} lines; "
            f"use an offset from 1 to {number:,}"
        )
    if more and len(lines) == PAGE_LINES:
        lines.pop()  # room for the line that says where the next page starts
    return _Page(lines, offset, offset + len(lines) - 1, more, cut, byte_limited)


def _skip_lines(
    file: BinaryIO, count: int, *, block: int = _COUNT_BLOCK, stretch: int = _COUNT_STRETCH
) -> int:
    """Move ``file`` past its next ``count`` lines; return how many lines it passed.

    Newlines are counted a block at a time by ``bytes.count``, so the lines
    before a page deep in a large file cost a scan of their bytes, not a
    Python step per line. A last line without a newline is a line too.
    """
    skipped = 0
    last = b"\n"
    while skipped < count:
        start = file.tell()
        data = file.read(block)
        if not data:
            return skipped + (last != b"\n")
        found = data.count(b"\n")
        if skipped + found < count:
            skipped += found
            last = data[-1:]
            continue
        needed = count - skipped
        begin = 0
        while (inside := data.count(b"\n", begin, begin + stretch)) < needed:
            needed -= inside
            begin += stretch
        position = begin - 1
        for _ in range(needed):
            position = data.index(b"\n", position + 1)
        file.seek(start + position + 1)
        return count
    return skipped
