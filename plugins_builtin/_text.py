"""Telling text files from binary ones, and clipping long lines for the model."""

from __future__ import annotations

__all__ = ("HEAD_BYTES", "binary_reason", "clip")

#: How much of a file decides whether it is text, like git and grep.
HEAD_BYTES = 8192


def binary_reason(head: bytes, *, complete: bool) -> str | None:
    """Why ``head`` (a file's first bytes) looks binary, or ``None`` for text.

    ``complete`` says ``head`` is the whole file; otherwise a multibyte
    character cut at its end is not held against it.
    """
    if head.isascii():
        return "a NUL byte" if b"\0" in head else None
    if b"\0" in head:
        return "a NUL byte"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        if not complete and error.reason == "unexpected end of data":
            return None
        return f"invalid UTF-8 at byte {error.start}"
    return None


def clip(text: str, limit: int, *, length: str | None = None) -> str:
    """``text`` cut to ``limit`` characters, saying so (and how long it was) when cut.

    ``length`` describes the whole line when ``text`` is only its start.
    """
    if len(text) <= limit and length is None:
        return text
    length = length or f"{len(text):,} characters"
    return f"{text[:limit]}… [line cut to {limit:,} characters of {length}]"
