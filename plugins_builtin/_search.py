"""The glob and grep tools: finding files and lines inside the Location."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import AnyStr, Generic

import anyio.from_thread
import anyio.to_thread
import attrs

import pegboard

from ._paths import ask_about_path, failure, resolve
from ._text import HEAD_BYTES, binary_reason, clip
from ._walk import FILE_FLAGS, Ignore, compile_glob, inherited_ignores, walk_files

__all__ = ("GlobInput", "GrepInput", "Search")

#: Paths glob lists at most; the rest are counted.
GLOB_LIMIT = 500
#: Matching lines grep lists at most; the rest are counted.
GREP_LIMIT = 200
#: Characters of one matching line grep shows.
GREP_LINE_CHARACTERS = 300
# Files bigger than this are searched a block at a time, never held whole.
_BLOCK = 16 << 20
# Looking for cancellation (about a microsecond) once every this many files.
_CHECK_EVERY = 64
# A regex is "literal" when nothing but escaped punctuation is special in it.
_ESCAPED_PUNCTUATION = re.compile(r"\\[^A-Za-z0-9]")
_SPECIAL = frozenset(".^$*+?{}[]|()\\")


@attrs.frozen
class GlobInput:
    pattern: str = attrs.field(
        metadata={
            "description": "A glob pattern such as '**/*.py' or 'src/**/*.{ts,tsx}'. Without "
            "a '/', it matches file names at any depth."
        }
    )
    path: str = attrs.field(
        default=".",
        metadata={"description": "The folder to search, relative to the Location root."},
    )


@attrs.frozen
class GrepInput:
    pattern: str = attrs.field(
        metadata={"description": "A Python regular expression, matched within each line."}
    )
    path: str = attrs.field(
        default=".",
        metadata={
            "description": "The folder (or one file) to search, relative to the Location root."
        },
    )
    include: str | None = attrs.field(
        default=None,
        metadata={"description": "Only search files whose names match this glob, e.g. '*.py'."},
    )


GLOB = f"""Find files by name pattern inside the Location.

Lists matching file paths, sorted, at most {GLOB_LIMIT} (and says how many there were).
Files and folders ignored by .gitignore, the .git folder and symbolic links are skipped."""

GREP = f"""Search file contents with a regular expression (Python syntax) inside the Location.

Reports matching lines as `path:line: text`, sorted by path and line, at most {GREP_LIMIT}
(and says how many there were). `include` filters file names with a glob. Binary files,
files ignored by .gitignore, the .git folder and symbolic links are skipped."""


@attrs.define
class _Found:
    """What a search found: the first shown entries and how many there were."""

    limit: int
    shown: list[str] = attrs.field(factory=list)
    count: int = 0
    files: int = 0
    searched: int = 0
    binary: int = 0

    def add(self, entry: str) -> None:
        self.count += 1
        if len(self.shown) < self.limit:
            self.shown.append(entry)

    @property
    def full(self) -> bool:
        return len(self.shown) >= self.limit


@attrs.frozen
class _Matcher(Generic[AnyStr]):
    #: Where the first match at or after a position starts, or -1.
    find: Callable[[AnyStr, int], int]
    newline: AnyStr
    show: Callable[[AnyStr], str]


def _regex(regex: re.Pattern[AnyStr]) -> Callable[[AnyStr, int], int]:
    search = regex.search

    def find(data: AnyStr, position: int) -> int:
        match = search(data, position)
        return -1 if match is None else match.start()

    return find


def _literal(literal: bytes) -> Callable[[bytes, int], int]:
    def find(data: bytes, position: int) -> int:
        return data.find(literal, position)

    return find


def _is_literal(pattern: str) -> bool:
    return not _SPECIAL.intersection(_ESCAPED_PUNCTUATION.sub("", pattern))


def _unescape(pattern: str) -> bytes:
    return _ESCAPED_PUNCTUATION.sub(lambda match: match[0][1], pattern).encode()


def _decode(line: bytes) -> str:
    return line.decode("utf-8", "replace")


class _Grep:
    """One grep: the pattern compiled for text, and for bytes where that is exact."""

    def __init__(self, pattern: str) -> None:
        self.text = _Matcher(_regex(re.compile(pattern, re.MULTILINE)), "\n", str)
        self.bytes: _Matcher[bytes] | None = None
        self.folded: _Matcher[bytes] | None = None
        self.literal = False
        # \s differs between str and bytes patterns even on ASCII text (U+001C-U+001F).
        if pattern.isascii() and "\\s" not in pattern and "\\S" not in pattern:
            try:
                regex = re.compile(pattern.encode(), re.MULTILINE)
            except re.error:  # \u, \N{...} and the like exist only in str patterns
                return
            self.bytes = _Matcher(_regex(regex), b"\n", _decode)
            if _is_literal(pattern):
                self.bytes = _Matcher(_literal(_unescape(pattern)), b"\n", _decode)
                self.literal = True
            elif pattern.startswith("(?i)") and _is_literal(pattern[4:]):
                # re's IGNORECASE search is ~10x slower than grep -i; on ASCII
                # text, finding the lowercased literal in lowercased text is exact.
                self.folded = _Matcher(_literal(_unescape(pattern[4:]).lower()), b"\n", _decode)

    def search(
        self, data: bytes, path: str, found: _Found, first: int = 1, *, is_ascii: bool | None = None
    ) -> None:
        """Add the matching lines of ``data``, whole lines numbered from ``first``."""
        # Searching bytes is exact for ASCII data, and for a literal pattern on
        # any UTF-8; other data is decoded once and searched as text.
        if self.bytes is None:
            _lines(self.text, data.decode("utf-8", "replace"), path, found, first)
        elif self.literal:
            _lines(self.bytes, data, path, found, first)
        elif not (data.isascii() if is_ascii is None else is_ascii):
            _lines(self.text, data.decode("utf-8", "replace"), path, found, first)
        elif self.folded is not None:
            _lines(self.folded, data, path, found, first, data.lower())
        else:
            _lines(self.bytes, data, path, found, first)


def _lines(
    matcher: _Matcher[AnyStr],
    data: AnyStr,
    path: str,
    found: _Found,
    first: int,
    haystack: AnyStr | None = None,
) -> None:
    """Add the lines of ``data`` where ``haystack`` (default: ``data``) matches."""
    # The whole buffer is searched at once; line numbers are counted only
    # up to each match, and the search resumes after the matching line.
    find, newline = matcher.find, matcher.newline
    haystack = data if haystack is None else haystack
    end = len(data)
    number, counted, position = first, 0, 0
    while position < end and 0 <= (start := find(haystack, position)) < end:
        # (a match starting at the end, after the final newline, is not a line)
        line_end = data.find(newline, start)
        if line_end < 0:
            line_end = end
        if found.full:  # past the cap, matching lines are only counted
            found.count += 1
        else:
            line_start = data.rfind(newline, 0, start) + 1
            number += data.count(newline, counted, line_start)
            counted = line_start
            text = matcher.show(data[line_start:line_end]).removesuffix("\r")
            found.add(f"{path}:{number}: {clip(text, GREP_LINE_CHARACTERS)}")
        position = line_end + 1


class Search:
    """The search tools of one Location, capturing its trusted services."""

    def __init__(self, filesystem: pegboard.Filesystem, permissions: pegboard.Permissions) -> None:
        self._filesystem = filesystem
        self._permissions = permissions

    def tools(self) -> dict[str, pegboard.Tool]:
        """The tools by authored name."""
        return {
            "glob": pegboard.tool(description=GLOB, execute=self.glob, input=GlobInput),
            "grep": pegboard.tool(description=GREP, execute=self.grep, input=GrepInput),
        }

    async def glob(
        self, input: GlobInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        if not input.pattern.strip():
            raise pegboard.ToolFailure("the glob pattern is empty; try '**/*' for every file")
        matches = _compile_glob(input.pattern, "pattern")
        real = resolve(self._filesystem, input.path)
        shown = self._filesystem.relative(real)
        await ask_about_path(
            self._permissions,
            "glob",
            shown,
            directory=True,
            metadata={"tool": "glob", "pattern": input.pattern, "path": shown},
        )
        found = await anyio.to_thread.run_sync(self._glob, real, input.path, matches)
        where = f"in {shown}" if shown != "." else "in the Location"
        if not found.count:
            content = f"No files match {input.pattern!r} {where}."
        else:
            content = "\n".join(found.shown)
            if found.count > len(found.shown):
                content += (
                    f"\n(showing the first {len(found.shown):,} of {found.count:,} matching "
                    "files; narrow the pattern or the path to see the rest)"
                )
        metadata = {"path": shown, "matches": found.count, "shown": len(found.shown)}
        return pegboard.ToolResponse(content=content, metadata=metadata)

    def _glob(self, real: Path, path: str, matches: Callable[[str, str], bool]) -> _Found:
        found = _Found(GLOB_LIMIT)
        top, prefix, rules = self._open_top(real, path)
        try:
            for index, (_, name, relative) in enumerate(walk_files(top, rules)):
                if not index % _CHECK_EVERY:
                    anyio.from_thread.check_cancelled()
                if matches(name, relative):
                    found.add(prefix + relative)
        finally:
            os.close(top)
        return found

    async def grep(
        self, input: GrepInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        try:
            grep = _Grep(input.pattern)
        except re.error as error:
            raise pegboard.ToolFailure(
                f"{input.pattern!r} is not a valid regular expression: {error}; grep takes "
                r"Python syntax (escape special characters such as . ( [ with \)"
            ) from None
        include = None if input.include is None else _compile_glob(input.include, "include")
        real = resolve(self._filesystem, input.path)
        shown = self._filesystem.relative(real)
        await ask_about_path(
            self._permissions,
            "grep",
            shown,
            directory=True,
            metadata={
                "tool": "grep",
                "pattern": input.pattern,
                "path": shown,
                "include": input.include,
            },
        )
        found = await anyio.to_thread.run_sync(self._grep, real, input.path, grep, include)
        where = f"in {shown}" if shown != "." else "in the Location"
        if not found.count:
            content = (
                f"No lines match {input.pattern!r} {where} ({found.searched:,} files searched)."
            )
        else:
            content = "\n".join(found.shown)
            if found.count > len(found.shown):
                content += (
                    f"\n(showing the first {len(found.shown):,} of {found.count:,} matching lines "
                    f"in {found.files:,} files; narrow the pattern, the path or include to see "
                    "the rest)"
                )
        metadata = {
            "path": shown,
            "matches": found.count,
            "files": found.files,
            "shown": len(found.shown),
            "searched": found.searched,
            "binary_skipped": found.binary,
        }
        return pegboard.ToolResponse(content=content, metadata=metadata)

    def _grep(
        self,
        real: Path,
        path: str,
        grep: _Grep,
        include: Callable[[str, str], bool] | None,
    ) -> _Found:
        found = _Found(GREP_LIMIT)
        if not real.is_dir():
            try:
                descriptor = self._filesystem.open_read(real)
            except OSError as error:
                raise failure(error, path, self._filesystem) from None
            _grep_file(descriptor, self._filesystem.relative(real), grep, found)
            return found
        top, prefix, rules = self._open_top(real, path)
        try:
            for index, (folder, name, relative) in enumerate(walk_files(top, rules)):
                if not index % _CHECK_EVERY:
                    anyio.from_thread.check_cancelled()
                if include is not None and not include(name, relative):
                    continue
                try:
                    descriptor = os.open(name, FILE_FLAGS, dir_fd=folder)
                except OSError:
                    continue  # unreadable, or swapped for a symlink since it was listed
                _grep_file(descriptor, prefix + relative, grep, found)
        finally:
            os.close(top)
        return found

    def _open_top(self, real: Path, path: str) -> tuple[int, str, list[Ignore]]:
        """The search folder, opened; how its paths are shown; the rules it inherits."""
        try:
            top = self._filesystem.open_directory(real)
        except OSError as error:
            raise failure(error, path, self._filesystem) from None
        shown = self._filesystem.relative(real)
        prefix = "" if shown == "." else f"{shown}/"
        return top, prefix, inherited_ignores(self._filesystem, shown)


def _compile_glob(pattern: str, field: str) -> Callable[[str, str], bool]:
    try:
        return compile_glob(pattern)
    except (ValueError, re.error) as error:
        raise pegboard.ToolFailure(f"{field} {pattern!r} is not a usable glob: {error}") from None


def _grep_file(descriptor: int, path: str, grep: _Grep, found: _Found) -> None:
    """Search one open file (closed here); binary and irregular files are skipped.

    Most files are read whole with one call; a big one a block of lines at a time.
    """
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return
        want = info.st_size + 1 if info.st_size < _BLOCK else _BLOCK
        chunk = os.read(descriptor, want)
        is_ascii = chunk.isascii()
        if is_ascii:
            binary = chunk.find(b"\0", 0, HEAD_BYTES) >= 0
        else:
            complete = len(chunk) <= HEAD_BYTES and len(chunk) < want
            binary = binary_reason(chunk[:HEAD_BYTES], complete=complete) is not None
        if binary:
            found.binary += 1
            return
        found.searched += 1
        before = found.count
        if len(chunk) < want:  # the whole file, as nearly always
            grep.search(chunk, path, found, is_ascii=is_ascii)
        else:
            _grep_blocks(descriptor, chunk, path, grep, found)
        if found.count > before:
            found.files += 1
    finally:
        os.close(descriptor)


def _grep_blocks(descriptor: int, chunk: bytes, path: str, grep: _Grep, found: _Found) -> None:
    """Search a big (or growing) file a block of whole lines at a time."""
    line, pending = 1, b""
    searched: bytes | None = None  # the last block searched; its lines not yet counted
    while chunk:
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            if searched is not None:
                line += searched.count(b"\n")
            searched, pending = data[:cut], data[cut:]
            grep.search(searched, path, found, line)
        else:
            pending = data  # one line longer than a block so far
        chunk = os.read(descriptor, _BLOCK)
    if pending:
        if searched is not None:
            line += searched.count(b"\n")
        grep.search(pending, path, found, line)
