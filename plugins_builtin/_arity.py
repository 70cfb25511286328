"""What answering "always" saves for a shell command: a prefix pattern by its arity."""

from __future__ import annotations

import re

from ._commands import Command, is_privileged, is_python, shown, visible

__all__ = ("approval_pattern", "escape")

# How many leading words name what a command does, for an "always" pattern:
# `git status *`, `npm run test *`. One word when a command is not listed.
_ARITY = {
    "git": 2, "npm": 2, "npm run": 3, "npm exec": 3, "pnpm": 2, "pnpm run": 3, "yarn": 2,
    "yarn run": 3, "bun": 2, "bun run": 3, "cargo": 2, "go": 2, "docker": 2,
    "docker compose": 3, "kubectl": 2, "make": 2, "pip": 2, "pip3": 2, "uv": 2, "uv run": 3,
    "poetry": 2, "poetry run": 3, "gh": 3, "apt": 2, "apt-get": 2, "brew": 2, "systemctl": 2,
    "terraform": 2, "helm": 2, "dotnet": 2, "mvn": 2, "gradle": 2, "conda": 2, "deno": 2,
    "rustup": 2, "pytest": 1, "ruff": 2, "mypy": 1,
}  # fmt: skip
# Programs whose arguments are code: "always" saves the exact command.
_CODE = frozenset({"awk", "gawk", "mawk", "nawk", "sed", "gsed", "perl", "ruby", "php", "lua",
                   "Rscript", "osascript", "node", "nodejs", "bun"})  # fmt: skip
_CODE_FLAGS = frozenset({"-e", "-E", "--eval", "-p", "--print", "-r"})
_PYTHON_CODE_FLAG = re.compile(r"-[A-Za-z]*c")


def approval_pattern(command: Command) -> str | None:
    """What answering "always" saves for ``command``: a prefix pattern by its arity.

    The exact command (wildcards escaped) for code given inline (``python3 -c``,
    ``awk '…'``) or when an option or an expansion falls inside the prefix;
    None for what no pattern may cover (opaque commands).
    """
    if command.opaque is not None:
        return None
    words = list(command.words)
    base = words[0]
    exact = escape(command.text)
    if is_privileged(base):
        return exact
    if base in _CODE or is_python(base):
        python = is_python(base)
        if any(
            _PYTHON_CODE_FLAG.match(word)
            if python
            else word in _CODE_FLAGS or word.startswith("--eval")
            for word in words[1:]
        ):
            return exact
        if base in ("awk", "gawk", "mawk", "nawk", "sed", "gsed"):
            return exact
        arity = 3 if words[1:2] == ["-m"] else 2
    else:
        arity = max(
            (_ARITY[key] for key in _ARITY if words[: len(key.split())] == key.split()),
            default=1,
        )
    prefix = words[:arity]
    if len(prefix) < arity and arity > 1:
        return exact
    named = prefix[2:] if prefix[1:2] == ["-m"] else prefix[1:]  # `python3 -m MODULE`
    if any(word.startswith("-") or "$" in word or "`" in word for word in named):
        return exact
    return escape(visible(" ".join(shown(word) for word in prefix), newlines=False)) + " *"


def escape(text: str) -> str:
    """``text`` as a pattern that matches exactly it: ``*``, ``?`` and ``\\`` escaped."""
    return re.sub(r"([*?\\])", r"\\\1", text)
