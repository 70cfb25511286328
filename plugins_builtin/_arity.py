"""What answering "always" saves for a shell command: a prefix pattern by its arity."""

from __future__ import annotations

import posixpath

from ._commands import Command, shown, visible
from ._paths import escape
from ._wrappers import SHELLS, is_privileged, is_python

__all__ = ("approval_pattern", "escape")

# How many leading words name what a command does, for an "always" pattern:
# `git status *`, `npm run test *`. One word when a command is not listed.
_ARITY = {
    "git": 2, "npm": 2, "npm run": 3, "pnpm": 2, "pnpm run": 3, "yarn": 2, "yarn run": 3,
    "cargo": 2, "go": 2, "docker": 2, "docker compose": 3, "kubectl": 2, "pip": 2, "pip3": 2,
    "uv": 2, "uv run": 3, "poetry": 2, "poetry run": 3, "gh": 3, "apt": 2, "apt-get": 2,
    "brew": 2, "systemctl": 2, "terraform": 2, "helm": 2, "dotnet": 2, "mvn": 2, "gradle": 2,
    "conda": 2, "rustup": 2, "pytest": 1, "ruff": 2, "mypy": 1,
}  # fmt: skip
# Shells, interpreters and programs that run their arguments, options or files
# as code: no prefix of theirs is safe to widen, so "always" saves the exact command.
_EXACT = SHELLS | {"fish", "perl", "ruby", "php", "lua", "node", "nodejs", "deno", "bun", "bunx",
                   "npx", "Rscript", "osascript", "ssh", "scp", "rsync", "tar", "zip", "unzip",
                   "make", "gmake", "cmake", "ninja", "vim", "vi", "nvim", "emacs", "less",
                   "more", "man", "find", "xargs", "env", "awk", "gawk", "mawk", "nawk", "sed",
                   "gsed"}  # fmt: skip
# Subcommands that run what they are given: `docker run IMAGE CMD`, `npm exec PKG`.
_EXACT_SUBCOMMANDS = {
    "docker": {"run", "exec"}, "podman": {"run", "exec"}, "npm": {"exec"}, "pnpm": {"exec", "dlx"},
    "yarn": {"exec", "dlx"}, "pip": {"install"}, "pip3": {"install"},
}  # fmt: skip
# git options that run a program or move git into another repository.
_GIT_EXACT = ("-C", "--upload-pack", "--receive-pack", "--exec", "-c", "--config-env")


def approval_pattern(command: Command) -> str | None:
    """What answering "always" saves for ``command``: a prefix pattern by its arity.

    The exact command (wildcards escaped) for shells, interpreters and programs
    that run their arguments as code, or when an option or an expansion falls
    inside the prefix; None for what no pattern may cover (opaque commands).
    """
    if command.opaque is not None:
        return None
    words = list(command.words)
    # A name shown as written (`./bin/python`) is judged by what it says it is.
    base = posixpath.basename(words[0]) or words[0]
    exact = escape(command.text)
    if is_privileged(base) or base in _EXACT or is_python(base):
        return exact
    if words[1:2] and words[1] in _EXACT_SUBCOMMANDS.get(base, ()):
        return exact
    if base == "git" and any(word.startswith(_GIT_EXACT) for word in words[1:]):
        return exact
    arity = max(
        (_ARITY[key] for key in _ARITY if words[: len(key.split())] == key.split()),
        default=1,
    )
    prefix = words[:arity]
    if len(prefix) < arity and arity > 1:
        return exact
    if any(word.startswith("-") or "$" in word or "`" in word for word in prefix[1:]):
        return exact
    return escape(visible(" ".join(shown(word) for word in prefix), newlines=False)) + " *"
