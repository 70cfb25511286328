"""Bash's escapes read in (``$'\\x72m'``), and control characters shown as escapes out."""

from __future__ import annotations

import re
import shlex
import unicodedata

__all__ = ("ansi_c", "shown", "visible")


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with control and format characters shown as escapes (``\\r``, ``\\x1b``).

    A terminal then cannot be made to hide part of a command from the person
    approving it; ``newlines=False`` escapes line breaks too.
    """
    shown = []
    for char in text:
        if (char == "\n" and newlines) or char == "\t":
            shown.append(char)
        elif char in "\r\n":
            shown.append("\\r" if char == "\r" else "\\n")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            code = ord(char)
            shown.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else
                f"\\U{code:08x}"
            )  # fmt: skip
        else:
            shown.append(char)
    return "".join(shown)


def shown(word: str) -> str:
    """``word`` as a resource shows it."""
    # Words holding blanks or quotes are quoted, so `a 'b c'` and `a b c` stay apart.
    if not word or any(char.isspace() or char in "'\"" for char in word):
        return shlex.quote(word)
    return word


_ANSI_C = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}  # fmt: skip


def ansi_c(body: str) -> str:
    """Bash's ``$'…'`` escapes, decoded as bash decodes them."""

    def decode(match: re.Match[str]) -> str:
        hexa, short, long, octal, control, other = match.groups()
        if hexa or short or long:
            code = int(hexa or short or long, 16)
            return chr(code) if code < 0x110000 else ""
        if octal:
            return chr(int(octal, 8) & 0xFF)
        if control:
            return chr(ord(control.upper()) ^ 0x40)
        return _ANSI_C_SIMPLE.get(other, other)

    return _ANSI_C.sub(decode, body)
