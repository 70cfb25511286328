"""The glob and grep tools: finding files and lines inside the Location, with ripgrep."""

from __future__ import annotations

import base64
import bisect
import contextlib
import os
import posixpath
import re
import stat
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import attrs
import orjson

import pegboard

from ._denied import may_deny, pruned_folders
from ._files import READS
from ._globs import compile_glob, escape
from ._paths import ask_about_path, failure, resolve
from ._text import clip

if TYPE_CHECKING:
    from . import _ripgrep

__all__ = ("GlobInput", "GrepInput", "Search")

#: Paths glob lists at most; the rest are counted.
GLOB_LIMIT = 500
#: Matching lines grep lists at most; the rest are counted.
GREP_LIMIT = 200
#: Characters of one matching line grep shows.
GREP_LINE_CHARACTERS = 300
#: Bytes of a pattern (or include) grep takes: well under the 128 KiB the system
#: allows one argument of a command line.
MAX_PATTERN = 65_536
# Escaped bytes of an overlong line decoded for its start: enough for the
# characters shown, whatever their escapes.
_LONG_PREFIX = GREP_LINE_CHARACTERS * 12


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
        metadata={
            "description": "A regular expression (Rust regex syntax, as ripgrep), matched "
            "within each line."
        }
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
Files and folders ignored by .gitignore, the .git folder, symbolic links and paths the
permission rules deny reading are skipped."""

GREP = f"""Search file contents with a regular expression (Rust regex syntax, as ripgrep).

Reports matching lines as `path:line: text`, sorted by path and line, at most {GREP_LIMIT}
(and says how many there were). `include` filters file names with a glob. No look-around
or backreferences. Binary files, files ignored by .gitignore, the .git folder, symbolic
links and paths the permission rules deny reading are skipped."""


def _key(path: str) -> list[str]:
    # Folder by folder, as a sorted walk lists them: "a/b" before "a.txt".
    return path.split("/")


@attrs.define
class _Found:
    """What a search found: the first entries in path order, and how many there were."""

    limit: int
    shown: list[tuple[list[str], int, str]] = attrs.field(factory=list)
    count: int = 0
    files: int = 0
    #: Files the search looked at; counted from a listing, only when one is made.
    searched: int | None = None
    skipped_files: int = 0
    skipped_folders: int = 0

    def wants(self, key: list[str], line: int = 0) -> bool:
        return len(self.shown) < self.limit or (key, line) < self.shown[-1][:2]

    def keep(self, key: list[str], line: int, entry: str) -> None:
        if self.wants(key, line):
            bisect.insort(self.shown, (key, line, entry))
            del self.shown[self.limit :]

    def skipped(self) -> str:
        parts = []
        if self.skipped_files:
            parts.append(_plural(self.skipped_files, "file"))
        if self.skipped_folders:
            parts.append(_plural(self.skipped_folders, "folder"))
        if not parts:
            return ""
        return f"\n({' and '.join(parts)} skipped: the permission rules deny reading them)"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


@attrs.frozen
class _Scope:
    """Where one search runs and what it passes to rg."""

    top: str  # the search path as shown ("." for the root)
    cwd: int  # the Location root, open
    cwd_path: str
    options: tuple[str, ...]
    denied: Callable[[str], bool] | None  # None: no rule can deny a read
    folders: tuple[str, ...]  # pruned folders that exist below top

    def inside(self, path: str) -> bool:
        """Whether a path rg reported is the search path or below it, written plainly."""
        if not path or posixpath.normpath(path) != path:
            return False
        if self.top == ".":
            return not path.startswith(("/", "../")) and path != ".."
        return path == self.top or path.startswith(self.top.rstrip("/") + "/")


class Search:
    """The search tools of one Location, capturing its trusted services."""

    def __init__(self, filesystem: pegboard.Filesystem, permissions: pegboard.Permissions) -> None:
        self._filesystem = filesystem
        self._permissions = permissions

    def tools(self) -> dict[str, pegboard.Tool]:
        """The tools by authored name."""
        return {
            "glob": pegboard.tool(
                description=GLOB,
                execute=self.glob,
                input=GlobInput,
                title="Find files",
                annotations=READS,
            ),
            "grep": pegboard.tool(
                description=GREP,
                execute=self.grep,
                input=GrepInput,
                title="Search file contents",
                annotations=READS,
            ),
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
        found = _Found(GLOB_LIMIT)
        async with self._scope(real, shown, (), directory=True) as scope:
            prefix = "" if shown == "." else shown.rstrip("/") + "/"
            denied = scope.denied

            def each(path: str) -> None:
                if not matches(posixpath.basename(path), path[len(prefix) :]):
                    return
                if denied is not None and denied(path):
                    found.skipped_files += 1
                    return
                found.count += 1
                found.keep(_key(path), 0, path)

            await _files(scope, each)
            found.skipped_folders = len(scope.folders)
        await self._confirm(found)
        where = f"in {shown}" if shown != "." else "in the Location"
        if not found.count:
            content = f"No files match {input.pattern!r} {where}."
        else:
            content = "\n".join(entry for _, _, entry in found.shown)
            if found.count > len(found.shown):
                content += (
                    f"\n(showing the first {len(found.shown):,} of {found.count:,} matching "
                    "files; narrow the pattern or the path to see the rest)"
                )
        content += found.skipped()
        metadata = {"path": shown, "matches": found.count, "shown": len(found.shown)}
        metadata.update(_skipped_metadata(found))
        return pegboard.ToolResponse(content=content, metadata=metadata)

    async def grep(
        self, input: GrepInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[None]:
        for field, value, instead, shorter in (
            ("pattern", input.pattern, r"write it as \x00 to match one", "search for part of it"),
            ("include", input.include, "remove it", "give a shorter glob"),
        ):
            if value is None:
                continue
            if "\0" in value:
                raise pegboard.ToolFailure(
                    f"{field} holds a NUL character, which grep cannot take; {instead}"
                )
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > MAX_PATTERN:
                raise pegboard.ToolFailure(
                    f"{field} is {size:,} bytes long; grep takes at most {MAX_PATTERN:,}: {shorter}"
                )
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
        options: tuple[str, ...] = ()
        by_path: Callable[[str], bool] | None = None
        if input.include is not None and include is not None:
            if "/" in input.include.strip().removeprefix("./"):
                prefix = "" if shown == "." else shown.rstrip("/") + "/"
                by_path = _by_path(include, prefix)
            else:  # names: rg's own file types filter them before searching
                options = (f"--type-add=include:{input.include.strip()}", "--type=include")
        found = _Found(GREP_LIMIT)
        async with self._scope(real, shown, options) as scope:
            excluded: list[str] = []
            if scope.denied is not None:
                # Denied files are listed first and left out of the search, so
                # nothing about their content can show, not even in a count.
                found.searched = await _list_for_grep(scope, by_path, excluded)
                found.skipped_files = len(excluded)
            found.skipped_folders = len(scope.folders)
            # rg searches a path it is given even when a --glob excludes it: a
            # denied file named as the path is not handed to rg at all.
            if shown not in excluded:
                await _grep(scope, input.pattern, excluded, by_path, found)
            if not found.count and found.searched is None:
                # rg's JSON output counts only files with matches; "nothing
                # matched" says how many files were looked at.
                found.searched = await _list_for_grep(scope, by_path, [])
        await self._confirm(found)
        where = f"in {shown}" if shown != "." else "in the Location"
        if not found.count:
            searched = found.searched or 0
            content = f"No lines match {input.pattern!r} {where} ({searched:,} files searched)."
        else:
            content = "\n".join(entry for _, _, entry in found.shown)
            if found.count > len(found.shown):
                content += (
                    f"\n(showing the first {len(found.shown):,} of {found.count:,} matching lines "
                    f"in {found.files:,} files; narrow the pattern, the path or include to see "
                    "the rest)"
                )
        content += found.skipped()
        metadata: dict[str, Any] = {
            "path": shown,
            "matches": found.count,
            "files": found.files,
            "shown": len(found.shown),
        }
        if found.searched is not None:
            metadata["searched"] = found.searched
        metadata.update(_skipped_metadata(found))
        return pegboard.ToolResponse(content=content, metadata=metadata)

    @contextlib.asynccontextmanager
    async def _scope(
        self, real: Path, shown: str, options: tuple[str, ...], *, directory: bool = False
    ) -> AsyncIterator[_Scope]:
        """The root opened, the .gitignore rules above ``shown``, the folders rules prune."""
        try:
            info = await anyio.Path(real).stat()
            if directory and not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(shown)
        except OSError as error:
            raise failure(error, shown, self._filesystem) from None
        try:
            root = self._filesystem.open_directory(self._filesystem.root)
        except OSError as error:
            raise failure(error, self._filesystem.root, self._filesystem) from None
        # ripgrep runs the searches: imported at the first, not by every Location.
        from . import _ripgrep

        ignore: Path | None = None
        try:
            arguments = list(_ripgrep.BASE_OPTIONS)
            if shown != "." and not shown.startswith("/"):
                ignore = await anyio.to_thread.run_sync(self._inherited_ignores, shown)
            if ignore is not None:
                arguments.append(f"--ignore-file={ignore}")
            denied = None
            folders: list[str] = []
            if may_deny(self._permissions):
                evaluate = self._permissions.evaluate
                denied = _denier(evaluate)
                pruned = pruned_folders(self._permissions)
                arguments.extend(f"--glob=!/{escape(folder)}/" for folder in pruned)
                folders = await anyio.to_thread.run_sync(self._existing, pruned, shown)
            arguments.extend(options)
            yield _Scope(
                top=shown,
                cwd=root,
                cwd_path=str(self._filesystem.root),
                options=tuple(arguments),
                denied=denied,
                folders=tuple(folders),
            )
        finally:
            os.close(root)
            if ignore is not None:
                await anyio.Path(ignore).unlink(missing_ok=True)

    def _inherited_ignores(self, shown: str) -> Path | None:
        """The .gitignore rules of the folders from the root down to above ``shown``, rebased.

        rg applies no ignore file above the folder it searches (so nothing outside
        the Location decides); these are passed as one --ignore-file, which rg
        matches against paths from the root, the folder it runs in.
        """
        if shown == "." or shown.startswith("/"):
            return None
        parts = shown.split("/")
        lines: list[str] = []
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            try:
                data = self._filesystem.read_bytes_sync(
                    f"{folder}/.gitignore" if folder else ".gitignore"
                )
            except OSError:
                continue
            text = data.decode("utf-8", "replace")
            rebased = text.splitlines() if not folder else _rebase(text, folder)
            lines.extend(line for line in rebased if _may_apply_below(line, parts))
        if not lines:
            return None
        import tempfile  # imported on the first search, not when the tools are built

        descriptor, name = tempfile.mkstemp(prefix="pegboard-gitignore-")
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="surrogateescape") as file:
            file.write("\n".join(lines) + "\n")
        return Path(name)

    def _existing(self, folders: Sequence[str], shown: str) -> list[str]:
        """The pruned folders that exist (as folders, not links) below ``shown``."""
        below = [
            folder
            for folder in folders
            if shown == "." or folder.startswith(shown.rstrip("/") + "/")
        ]
        existing = []
        for folder in below:
            try:
                info = os.lstat(self._filesystem.root / folder)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                existing.append(folder)
        return existing

    async def _confirm(self, found: _Found) -> None:
        """Drop any shown path that does not resolve inside the Location (a swapped link)."""

        def check() -> list[tuple[list[str], int, str]]:
            kept = []
            for key, line, entry in found.shown:
                try:
                    self._filesystem.resolve("/".join(key))
                except (OSError, ValueError):
                    continue
                kept.append((key, line, entry))
            return kept

        kept = await anyio.to_thread.run_sync(check)
        if len(kept) < len(found.shown):
            dropped = {"/".join(key) for key, _, _ in found.shown} - {
                "/".join(key) for key, _, _ in kept
            }
            found.count -= len(found.shown) - len(kept)
            found.files = max(0, found.files - len(dropped))
            found.shown = kept


def _skipped_metadata(found: _Found) -> dict[str, int]:
    if not (found.skipped_files or found.skipped_folders):
        return {}
    return {"skipped_files": found.skipped_files, "skipped_folders": found.skipped_folders}


def _denier(evaluate: Callable[[str, str], str]) -> Callable[[str], bool]:
    def denied(path: str) -> bool:
        return evaluate("read", path) == "deny"

    return denied


def _by_path(include: Callable[[str, str], bool], prefix: str) -> Callable[[str], bool]:
    def matches(path: str) -> bool:
        return include(posixpath.basename(path), path[len(prefix) :])

    return matches


def _rebase(text: str, folder: str) -> list[str]:
    """The lines of ``folder``'s .gitignore, rewritten to match paths from the root."""
    base = "/" + escape(folder) + "/"
    lines = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            lines.append(line)
            continue
        negate = line.startswith("!")
        body = line[1:] if negate else line
        # A slash before the end anchors the pattern to its folder; otherwise
        # it matches at any depth below it.
        anchored = "/" in body.rstrip("/")
        rebased = base + body.lstrip("/") if anchored else f"{base}**/{body}"
        lines.append(("!" if negate else "") + rebased)
    return lines


def _may_apply_below(line: str, folder: list[str]) -> bool:
    """Whether a root-based .gitignore line may match a path below ``folder``.

    Rules anchored elsewhere (``/docs/build``, ``generated/x.txt`` in the root's
    file when ``src`` is searched) are left out, so a huge .gitignore costs rg
    only the rules that matter; anything unsure is kept.
    """
    body = line.removeprefix("!").rstrip("/")
    if not body.strip() or line.startswith("#") or "**" in body or "/" not in body:
        return True
    segments = body.lstrip("/").split("/")
    if len(segments) <= len(folder):
        return False  # it names the folder or one above: never a path rg walks
    return all(
        any(char in segment for char in "*?[\\") or segment == name
        for segment, name in zip(segments, folder, strict=False)
    )


def _compile_glob(pattern: str, field: str) -> Callable[[str, str], bool]:
    try:
        return compile_glob(pattern)
    except (ValueError, re.error) as error:
        raise pegboard.ToolFailure(f"{field} {pattern!r} is not a usable glob: {error}") from None


def _target(scope: _Scope) -> str:
    return "." if scope.top == "." else scope.top


def _plain(path: str) -> str:
    return path[2:] if path.startswith("./") else path


async def _files(scope: _Scope, each: Callable[[str], None]) -> None:
    """Call ``each`` (in a worker thread) with every file rg lists inside the search path."""
    from . import _ripgrep

    def consume(batch: list[bytes | _ripgrep.Long]) -> None:
        for message in batch:
            if isinstance(message, bytes):
                path = _plain(os.fsdecode(message))
                if scope.inside(path):
                    each(path)

    arguments = [*scope.options, "--files", "--null", "--", _target(scope)]
    await _ripgrep.run(
        arguments, cwd=scope.cwd, cwd_path=scope.cwd_path, consume=consume, separator=b"\0"
    )


async def _list_for_grep(
    scope: _Scope, by_path: Callable[[str], bool] | None, excluded: list[str]
) -> int:
    """How many files grep searches; the ones the rules deny are added to ``excluded``."""
    searched = 0
    denied = scope.denied

    def each(path: str) -> None:
        nonlocal searched
        if by_path is not None and not by_path(path):
            return
        if denied is not None and denied(path):
            excluded.append(path)
        else:
            searched += 1

    await _files(scope, each)
    return searched


@attrs.define
class _Matches:
    """Reads rg's JSON messages into a `_Found`, one file at a time."""

    scope: _Scope
    by_path: Callable[[str], bool] | None
    found: _Found
    path: str | None = None
    key: list[str] = attrs.field(factory=list)
    wanted: bool = False
    summary: bool = False

    def consume(self, batch: list[bytes | _ripgrep.Long]) -> None:
        from . import _ripgrep

        found = self.found
        for message in batch:
            if type(message) is not bytes:
                assert isinstance(message, _ripgrep.Long)
                if self.path is not None and self.wanted:
                    _long_match(message, self.path, self.key, found)
                continue
            # The type's first letter, after '{"type":"': by far most messages
            # are matches in files already past the cap, skipped unparsed.
            kind = message[9:10]
            if kind == b"m":
                if self.path is None or not self.wanted:
                    continue
                data = orjson.loads(message)["data"]
                line = data.get("line_number") or 0
                if not found.wants(self.key, line):
                    self.wanted = False  # later lines of this file come later still
                    continue
                text = _ripgrep.decode(data["lines"], "replace")
                text = text.removesuffix("\n").removesuffix("\r")
                entry = f"{self.path}:{line}: {clip(text, GREP_LINE_CHARACTERS)}"
                found.keep(self.key, line, entry)
            elif kind == b"b":
                self.begin(_plain(_ripgrep.decode(orjson.loads(message)["data"]["path"])))
            elif kind == b"e":
                if self.path is not None:
                    lines = orjson.loads(message)["data"]["stats"]["matched_lines"]
                    found.count += lines
                    found.files += lines > 0
                self.path = None
            elif kind == b"s":
                self.summary = True

    def begin(self, path: str) -> None:
        scope = self.scope
        if (
            not scope.inside(path)
            or (self.by_path is not None and not self.by_path(path))
            or (scope.denied is not None and scope.denied(path))
        ):
            self.path = None  # not reported, not counted
            return
        self.path = path
        self.key = _key(path)
        self.wanted = self.found.wants(self.key)


async def _grep(
    scope: _Scope,
    pattern: str,
    excluded: Sequence[str],
    by_path: Callable[[str], bool] | None,
    found: _Found,
) -> None:
    from . import _ripgrep

    arguments = [*scope.options, "--json", "--regexp", pattern, "--", _target(scope)]
    config = None
    if excluded:
        # Any number of exclusions, through a config file rather than argv.
        lines = [f"--glob=!/{escape(path)}".replace("\n", "?") for path in excluded]
        config = await anyio.to_thread.run_sync(_write_config, lines)
        arguments.remove("--no-config")
    matches = _Matches(scope, by_path, found)
    try:
        done = await _ripgrep.run(
            arguments,
            cwd=scope.cwd,
            cwd_path=scope.cwd_path,
            config=None if config is None else str(config),
            consume=matches.consume,
        )
    finally:
        if config is not None:
            await anyio.Path(config).unlink(missing_ok=True)
    if done.returncode not in (0, 1) and not matches.summary:
        reason = done.stderr or f"rg exited with status {done.returncode}"
        if "regex" in reason:
            reason = " ".join(line.strip() for line in reason.removeprefix("rg: ").splitlines())
            raise pegboard.ToolFailure(
                f"{pattern!r} is not a valid regular expression: {reason}; grep takes Rust "
                r"regex syntax (no look-around or backreferences; escape special characters "
                r"such as . ( [ with \)"
            )
        raise pegboard.ToolFailure(f"grep failed: {reason}")


def _write_config(lines: list[str]) -> Path:
    import tempfile

    descriptor, name = tempfile.mkstemp(prefix="pegboard-rg-")
    with os.fdopen(descriptor, "w", encoding="utf-8", errors="surrogateescape") as file:
        file.write("\n".join(lines) + "\n")
    return Path(name)


def _long_match(message: _ripgrep.Long, path: str, key: list[str], found: _Found) -> None:
    """A matching line too long to hold: its start, and how long it was."""
    line = message.line_number or 0
    if not found.wants(key, line):
        return
    prefix = message.text[:_LONG_PREFIX]
    if message.encoding == "bytes":
        raw = base64.b64decode(prefix[: len(prefix) // 4 * 4])
        text = raw.decode("utf-8", "replace")
    else:
        text = ""
        for cut in range(12):  # an escape may be cut at the end
            try:
                text = orjson.loads(b'"' + prefix[: len(prefix) - cut] + b'"')
                break
            except orjson.JSONDecodeError:
                continue
    length = f"about {message.text_bytes:,} bytes"
    entry = f"{path}:{line}: {clip(text, GREP_LINE_CHARACTERS, length=length)}"
    found.keep(key, line, entry)
