"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import operator

from hypothesis import strategies as st

import pegboard

__all__ = (
    "authored_names",
    "characters",
    "content_items",
    "lines",
    "media",
    "names",
    "namespaces",
    "output_limits",
    "texts",
    "valid_names",
)

#: Characters that take two, three and four bytes in UTF-8, and a combining mark.
_MULTI_BYTE = "éßΩж€中日🙂𝄞\u0301\u200d"

#: Any character a ``str`` may hold and UTF-8 can encode (no lone surrogates),
#: with multi-byte characters drawn often.
characters = st.one_of(
    st.characters(exclude_categories=("Cs",)),
    st.sampled_from(_MULTI_BYTE),
)
_line_characters = st.one_of(
    st.characters(exclude_categories=("Cs",), exclude_characters="\n"),
    st.sampled_from(_MULTI_BYTE),
)

#: Any name a caller might pass, valid or not.
names = st.text(characters, max_size=80)

#: Names that already match ``^[A-Za-z][A-Za-z0-9_-]{0,63}$`` and are not reserved.
valid_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,63}", fullmatch=True).filter(
    lambda name: name != "execute"
)

#: Names as plugin authors write them: a letter, then punctuation, spaces and
#: non-ASCII characters that normalization turns into underscores.
authored_names = st.builds(
    operator.add,
    st.sampled_from("abcxyzABCXYZ"),
    st.text(st.one_of(st.sampled_from("abz09_-. /:"), st.sampled_from(_MULTI_BYTE)), max_size=40),
).filter(lambda name: name != "execute")

#: Namespaces, or none.
namespaces = st.none() | st.text(characters, max_size=20)

_short_lines = st.text(_line_characters, max_size=40)
_long_lines = st.builds(
    operator.mul, st.text(_line_characters, min_size=1, max_size=4), st.integers(100, 3000)
)

#: One line without its newline: empty, short, or very long.
lines = st.one_of(st.just(""), _short_lines, _long_lines)

_runs = st.builds(lambda line, count: "\n".join([line] * count), _short_lines, st.integers(2, 400))

#: Arbitrary Unicode text: multi-byte characters, empty lines, very long lines,
#: and runs of many lines.
texts = st.lists(st.one_of(lines, _runs), max_size=12).map("\n".join)

#: Media items, which bounding passes unchanged.
media = st.one_of(
    st.builds(pegboard.Image, st.binary(max_size=64), st.sampled_from(["image/png", "image/gif"])),
    st.builds(pegboard.Audio, st.binary(max_size=64), st.just("audio/wav")),
)

#: A content sequence mixing text items and media.
content_items = st.lists(st.one_of(texts.map(pegboard.Text), media), min_size=1, max_size=5)

#: Output limits at and above the smallest allowed.
output_limits = st.builds(
    pegboard.OutputLimits, max_lines=st.integers(8, 150), max_bytes=st.integers(1024, 8192)
)
