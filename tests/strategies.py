"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

import pegboard

__all__ = (
    "all_content_items",
    "answered_outcomes",
    "authored_names",
    "characters",
    "content_items",
    "json_values",
    "lines",
    "media",
    "names",
    "namespaces",
    "outcomes",
    "output_limits",
    "schema_values",
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

#: Plain JSON values: the shape of encoded outputs and metadata.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(characters, max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(characters, max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
_json_objects = st.dictionaries(st.text(characters, max_size=10), json_values, max_size=4)
_optional_text = st.none() | st.text(characters, max_size=20)

#: Every kind of content item, with every optional field drawn or left out.
all_content_items = st.one_of(
    texts.map(pegboard.Text),
    media,
    st.builds(
        pegboard.Image,
        st.binary(max_size=64),
        st.sampled_from(["image/jpeg", "image/webp", "image/svg+xml", "image/bmp"]),
    ),
    st.builds(pegboard.Audio, st.binary(max_size=64), st.sampled_from(["audio/mpeg", "audio/ogg"])),
    st.builds(
        pegboard.ResourceLink,
        uri=st.text(characters, max_size=30),
        name=st.text(characters, max_size=20),
        title=_optional_text,
        description=_optional_text,
        mime_type=st.none() | st.sampled_from(["text/plain", "application/pdf"]),
        size=st.none() | st.integers(0, 2**53),
    ),
    st.builds(
        pegboard.EmbeddedResource,
        uri=st.text(characters, max_size=30),
        text=texts,
        mime_type=st.none() | st.sampled_from(["text/plain", "text/markdown"]),
    ),
    st.builds(
        pegboard.EmbeddedResource,
        uri=st.text(characters, max_size=30),
        data=st.binary(max_size=64),
        mime_type=st.none() | st.sampled_from(["application/pdf", "image/png", "audio/wav"]),
    ),
)

_identity_values = st.builds(
    pegboard.CallIdentity,
    session_id=st.text(characters, max_size=12),
    agent=st.text(characters, max_size=12),
    message_id=st.text(characters, max_size=12),
    call_id=st.text(characters, max_size=12),
)
_kinds = st.sampled_from(
    [
        "unknown_tool",
        "unavailable",
        "final_step",
        "invalid_input",
        "tool_failure",
        "invalid_output",
        "rejected",
    ]
)


def _outcomes(
    identities: st.SearchStrategy[pegboard.CallIdentity | None],
    tool_names: st.SearchStrategy[str | None],
) -> st.SearchStrategy[pegboard.Outcome]:
    return st.one_of(
        st.builds(
            pegboard.Completed,
            json_values,
            # A completed call carries non-empty content (stored outcomes refuse less).
            st.lists(all_content_items, min_size=1, max_size=5).map(tuple),
            st.none() | _json_objects,
            call=identities,
            name=tool_names,
            # Keys no provider reads, so every rendering stays the same.
            provider_state=st.none()
            | st.dictionaries(st.sampled_from(["vendor", "future"]), json_values, max_size=2),
        ),
        st.builds(
            pegboard.Failed,
            st.builds(
                pegboard.ToolError,
                _kinds,
                st.text(characters, max_size=40),
                metadata=st.none() | _json_objects,
            ),
            st.lists(all_content_items, max_size=4).map(tuple),
            call=identities,
            name=tool_names,
        ),
    )


#: Any outcome: completed or failed, with or without metadata, partial content,
#: call identity and tool name.
outcomes = _outcomes(st.none() | _identity_values, st.none() | valid_names)

#: Outcomes as the pipeline makes them: each carries its call identity and tool name.
answered_outcomes = _outcomes(_identity_values, valid_names)


def schema_values(
    schema: Mapping[str, Any], root: Mapping[str, Any] | None = None
) -> st.SearchStrategy[Any]:
    """Values valid against a JSON Schema of the shapes tools use: types, enums,
    ``anyOf``, local ``$ref``, arrays and objects (optional properties drawn or left out).
    """
    root = schema if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: schema_values(root["$defs"][name], root))
    branches = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    if branches:
        return st.one_of([schema_values(branch, root) for branch in branches])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    types = schema.get("type")
    if isinstance(types, list):
        return st.one_of([schema_values({**schema, "type": kind}, root) for kind in types])
    if types == "string":
        return st.text(characters, max_size=10)
    if types == "integer":
        return st.integers(-3, 3000)
    if types == "number":
        return st.integers(-3, 3000) | st.floats(-1e6, 1e6)
    if types == "boolean":
        return st.booleans()
    if types == "null":
        return st.none()
    if types == "array":
        return st.lists(schema_values(schema.get("items", {}), root), max_size=3)
    if types == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {
                key: schema_values(value, root)
                for key, value in properties.items()
                if key in required
            },
            optional={
                key: schema_values(value, root)
                for key, value in properties.items()
                if key not in required
            },
        )
    return json_values
