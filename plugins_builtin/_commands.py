"""Reading a shell command for a permission request: the simple commands it chains."""

from __future__ import annotations

import re
import shlex

__all__ = ("approval_patterns", "simple_commands")

_PUNCTUATION = ";&|()<>`\n"
_SEPARATORS = frozenset(";&|()`\n")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def simple_commands(command: str) -> list[str]:
    """The simple commands in ``command``: split at ``;``, ``&&``, ``|``, newlines,
    ``$(``, backticks and the like, quotes honoured, leading ``NAME=value`` dropped.

    Only for matching permission rules, so a rule for ``rm *`` sees the ``rm``
    in ``ls && rm -rf x``. Splitting errs towards more parts, never fewer;
    a command the lexer cannot read (an open quote) gives ``[]``.
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""  # "#" inside a word is no comment; never let it hide a command
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    commands: list[str] = []
    words: list[str] = []
    for token in [*tokens, ";"]:
        if set(token) <= _SEPARATORS:
            while words and _ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words:
                commands.append(" ".join(words))
            words = []
        else:
            words.append(token)
    return commands


def approval_patterns(command: str, parts: list[str]) -> tuple[str, ...]:
    """What answering "always" approves: each simple command's first word, with any arguments."""
    firsts = [part.split()[0] for part in parts] or command.split()[:1]
    return tuple(dict.fromkeys(f"{first} *" for first in firsts))
