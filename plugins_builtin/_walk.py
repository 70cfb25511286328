"""Walking a folder inside the Location: sorted, honouring .gitignore, never through a symlink."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence

import attrs
import pathspec

import pegboard

__all__ = ("FILE_FLAGS", "Ignore", "compile_glob", "ignored", "inherited_ignores", "walk_files")

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Opening a listed file: never through a symlink, never blocking on a FIFO.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
#: A pattern with more brace alternatives than this is refused, not expanded.
MAX_ALTERNATIVES = 256


@attrs.frozen
class Ignore:
    """The rules of one .gitignore file, matched against paths below its folder.

    ``base`` is the folder's path relative to the walk's top (``""`` or ending
    in ``/``); ``lead`` is prepended instead for a file above the top.
    """

    base: str
    lead: str
    match: Callable[[str], bool | None]

    @classmethod
    def parse(cls, text: str, *, base: str = "", lead: str = "") -> Ignore | None:
        """The rules in ``text``, or ``None`` when it has none."""
        spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
        patterns = [
            pattern
            for pattern in spec.patterns
            if isinstance(pattern, pathspec.RegexPattern)
            and pattern.include is not None
            and pattern.regex is not None
        ]
        if not patterns:
            return None
        return cls(base, lead, _matcher(spec, patterns))

    def verdict(self, path: str) -> bool | None:
        """Whether the last rule matching ``path`` ignores it; ``None`` if none match."""
        return self.match(self.lead + path[len(self.base) :])


def _matcher(
    spec: pathspec.GitIgnoreSpec, patterns: Sequence[pathspec.RegexPattern]
) -> Callable[[str], bool | None]:
    # pathspec turns each gitignore line into a regular expression; matching
    # them one at a time costs ~10 us a path, so they are joined into one
    # alternation, last line first: the first alternative that matches is the
    # last matching line, which is the one git obeys.
    includes: dict[str, bool] = {}
    alternatives = []
    for index in reversed(range(len(patterns))):
        regex = patterns[index].regex
        assert regex is not None
        includes[f"r{index}"] = bool(patterns[index].include)
        alternatives.append(f"(?P<r{index}>{_NAMED_GROUP.sub('(?:', regex.pattern)})")
    try:
        combined = re.compile("|".join(alternatives))
    except re.error:  # patterns that cannot share one expression: pathspec's own matching
        return lambda path: spec.check_file(path).include

    def match(path: str) -> bool | None:
        found = combined.match(path)
        return None if found is None else includes[found.lastgroup or ""]

    return match


def ignored(rules: Sequence[Ignore], path: str) -> bool:
    """Whether ``path`` (ending in ``/`` for a folder) is ignored; deeper files decide first."""
    for rule in reversed(rules):
        verdict = rule.verdict(path)
        if verdict is not None:
            return verdict
    return False


def inherited_ignores(filesystem: pegboard.Filesystem, top: str) -> list[Ignore]:
    """The .gitignore rules of the folders from the Location root down to above ``top``.

    ``top`` is the walk's folder relative to the root. If those rules ignore
    ``top`` itself, none apply: a folder asked for by name is searched.
    """
    if top == "." or top.startswith("/"):
        return []
    parts = top.split("/")
    rules = []
    for depth in range(len(parts)):
        folder = "/".join(parts[:depth])
        try:
            data = filesystem.read_bytes_sync(f"{folder}/.gitignore" if folder else ".gitignore")
        except OSError:
            continue
        rule = Ignore.parse(data.decode("utf-8", "replace"), lead="/".join(parts[depth:]) + "/")
        if rule is not None:
            rules.append(rule)
    return [] if ignored(rules, "") else rules


def walk_files(
    top: int, rules: Sequence[Ignore], prefix: str = ""
) -> Iterator[tuple[int, str, str]]:
    """Every regular file below the open folder ``top``, in sorted path order.

    Yields ``(folder descriptor, name, path relative to top)``; the descriptor
    is open only until the next item. Symlinks are neither followed nor
    listed, ``.git`` is skipped, and ignored files and folders are left out
    (a file in an ignored folder stays out, whatever a ``!`` rule says, as in git).
    """
    with os.scandir(top) as listing:
        entries = sorted(listing, key=_name)
    local = list(rules)
    if any(entry.name == ".gitignore" for entry in entries):
        with contextlib.suppress(OSError):
            rule = Ignore.parse(_read(top, ".gitignore").decode("utf-8", "replace"), base=prefix)
            if rule is not None:
                local.append(rule)
    for entry in entries:
        name = entry.name
        if name == ".git":
            continue
        path = prefix + name
        if entry.is_dir(follow_symlinks=False):
            if local and ignored(local, path + "/"):
                continue
            try:
                child = os.open(name, _DIRECTORY, dir_fd=top)
            except OSError:
                continue  # unreadable, or swapped for a symlink since it was listed
            try:
                yield from walk_files(child, local, path + "/")
            finally:
                os.close(child)
        elif entry.is_file(follow_symlinks=False) and not (local and ignored(local, path)):
            yield top, name, path


def _read(folder: int, name: str) -> bytes:
    with os.fdopen(os.open(name, FILE_FLAGS, dir_fd=folder), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(f"{name} is not a regular file")
        return file.read()


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def compile_glob(pattern: str) -> Callable[[str, str], bool]:
    """A test ``(name, path) -> bool`` for a glob pattern.

    ``*`` and ``?`` stay within one path segment, ``**`` spans folders,
    ``[abc]`` and ``{a,b}`` choose. A pattern without ``/`` matches file
    names at any depth; one with ``/`` matches paths from the search folder.
    Raises ``ValueError`` for a pattern that expands too far.
    """
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    alternatives = _expand_braces(pattern)
    regex = re.compile("|".join(f"(?:{_translate(one)})" for one in alternatives), re.DOTALL)
    if "/" in pattern:
        return lambda name, path: regex.fullmatch(path) is not None
    return lambda name, path: regex.fullmatch(name) is not None


def _expand_braces(pattern: str) -> list[str]:
    results = [pattern]
    expanded: list[str] = []
    while results:
        current = results.pop()
        span = _brace(current)
        if span is None:
            expanded.append(current)
        else:
            start, end, choices = span
            results.extend(current[:start] + choice + current[end:] for choice in choices)
        if len(results) + len(expanded) > MAX_ALTERNATIVES:
            raise ValueError(f"the pattern expands to more than {MAX_ALTERNATIVES} alternatives")
    return sorted(set(expanded))


def _brace(pattern: str) -> tuple[int, int, list[str]] | None:
    """The first ``{a,b}`` group with a comma at its own level: (start, end, choices)."""
    for start, char in enumerate(pattern):
        if char != "{":
            continue
        depth, choices, last = 0, [], start + 1
        for index in range(start, len(pattern)):
            if pattern[index] == "{":
                depth += 1
            elif pattern[index] == "}":
                depth -= 1
                if depth == 0:
                    choices.append(pattern[last:index])
                    if len(choices) > 1:
                        return start, index + 1, choices
                    break
            elif pattern[index] == "," and depth == 1:
                choices.append(pattern[last:index])
                last = index + 1
    return None


def _translate(pattern: str) -> str:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            parts.append(".*")
            index += 2
            continue
        if char == "*":
            parts.append("[^/]*")
        elif char == "?":
            parts.append("[^/]")
        elif char == "[" and (close := pattern.find("]", index + 2)) != -1:
            body = pattern[index + 1 : close]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            # Escaped one by one, ranges kept: "[[]" or "[a&&b]" must not read as set syntax.
            body = "".join(c if c == "-" else re.escape(c) for c in body)
            parts.append(f"[{'^' if negate else ''}{body}]")
            index = close + 1
            continue
        else:
            parts.append(re.escape(char))
        index += 1
    return "".join(parts)
