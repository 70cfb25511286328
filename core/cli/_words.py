"""The library's messages in the command line's words: options, not Python arguments.

The engine speaks to a host written in Python (``host.location(trusted=[...])``,
``confine='off'``); the command line is a host whose user types options instead.
"""

from __future__ import annotations

import re
import shlex

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pegboard import PermissionRequest

__all__ = ("allow_options", "in_cli_words")

#: ``host.location(trusted=['notes'])``: trust one plugin by name; a message that
#: already names the option after it (``... or --trust notes``) says it once.
_TRUST_ONE = re.compile(
    r"host\.location\(trusted=\[(['\"])([^'\"]+)\1\]\)(?: or --trust \2(?![\w.-]))?"
)

#: ``confine='off'``, ``sandbox='required'``: a mode of a host.location() argument.
_MODE = re.compile(r"\b(confine|sandbox)='(auto|required|off)'")

#: Where the command line keeps long output: the default storage, under the data folder.
_STORAGE = (
    "set XDG_DATA_HOME to a folder of your own that you can write (pegboard keeps long "
    "output in $XDG_DATA_HOME/pegboard/tool-output)"
)

#: Fixed phrases of the library and what the command line's user does instead.
_PHRASES = (
    ("host.location(trusted=...)", "--trust PLUGIN"),
    ("host.location(permissions=...)", "--allow RULE"),
    ("enabled by the host's plugins=", "enabled by --plugin"),
    ("pass a writable storage= directory to host.location()", _STORAGE),
    ("pass a directory of your own as storage=", _STORAGE),
)

#: A message that starts with the host's own argument, as `plugin_specs` names it.
_SOURCES = (("plugins=: ", "--plugin: "), ("permissions=: ", "--allow/--deny: "))


def in_cli_words(message: str) -> str:
    """``message`` with each Python host argument it mentions as the option that sets it."""
    for source, option in _SOURCES:
        if message.startswith(source):
            message = option + message.removeprefix(source)
    message = _TRUST_ONE.sub(lambda match: f"--trust {shlex.quote(match[2])}", message)
    message = _MODE.sub(r"--\1 \2", message)
    for phrase, words in _PHRASES:
        message = message.replace(phrase, words)
    return message


def allow_options(request: PermissionRequest) -> str | None:
    """The ``--allow`` options that let ``request`` through without asking, quoted for a
    shell; None when no rule can (each resource is opaque: always asked)."""
    resources = [name for name in request.resources if name not in request.opaque]
    if not resources:
        return None
    rules = [request.action if name == "*" else f"{request.action}:{name}" for name in resources]
    return " ".join(f"--allow {shlex.quote(rule)}" for rule in dict.fromkeys(rules))
