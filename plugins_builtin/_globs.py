"""Glob patterns as the glob tool and grep's include read them; escaping paths for ripgrep."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ("MAX_ALTERNATIVES", "compile_glob", "escape")

#: A pattern with more brace alternatives than this is refused, not expanded.
MAX_ALTERNATIVES = 256
_SPECIAL = re.compile(r"([\\*?\[\]{}])")


def escape(path: str) -> str:
    """``path`` as a gitignore glob that matches exactly it (ripgrep's --glob syntax)."""
    return _SPECIAL.sub(r"\\\1", path)


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
