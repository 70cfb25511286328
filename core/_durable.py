"""Durable outcomes: one versioned, plain-JSON form of an outcome, and back."""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, get_args

import attrs

if TYPE_CHECKING:
    import jsonschema

from ._content import (
    Audio,
    ContentAnnotations,
    ContentItem,
    EmbeddedResource,
    Image,
    ResourceLink,
    Text,
)
from ._json import find_problem, freeze, thaw
from ._outcome import CallIdentity, Completed, ErrorKind, Failed, Outcome, ToolError

__all__ = ("VERSION", "dump_outcome", "load_outcome")

#: The version of the stored form this pegboard writes and reads.
VERSION: Final = 1

# Deep enough for any output a codec accepted (the codecs' own bound is lower).
_MAX_DEPTH = 512

_STRING = {"type": "string"}
_OPTIONAL_STRING = {"type": ["string", "null"]}
_BYTES = {"type": "string", "contentEncoding": "base64"}
_OBJECT_OR_NULL = {"type": ["object", "null"]}

_ITEMS: Final[Mapping[str, Mapping[str, Any]]] = {
    "text": {"text": _STRING},
    "image": {"data": _BYTES, "mime_type": _STRING},
    "audio": {"data": _BYTES, "mime_type": _STRING},
    "resource_link": {
        "uri": _STRING,
        "name": _STRING,
        "title": _OPTIONAL_STRING,
        "description": _OPTIONAL_STRING,
        "mime_type": _OPTIONAL_STRING,
        "size": {"type": ["integer", "null"]},
    },
    "resource": {
        "uri": _STRING,
        "text": _OPTIONAL_STRING,
        "data": _OPTIONAL_STRING,
        "mime_type": _OPTIONAL_STRING,
    },
}
# Stored only when an item has them, so outcomes without them read as before.
_ANNOTATIONS = {
    "type": "object",
    "properties": {
        "audience": {"type": "array", "items": {"enum": ["user", "assistant"]}},
        "priority": {"type": "number", "minimum": 0, "maximum": 1},
        "last_modified": _STRING,
    },
    "additionalProperties": False,
}
_REQUIRED = {
    "text": ["text"],
    "image": ["data", "mime_type"],
    "audio": ["data", "mime_type"],
    "resource_link": ["uri", "name"],
    "resource": ["uri"],
}
# One schema per item type, chosen by "type", so an error names the field that
# is wrong rather than "not valid under any of the given schemas".
_ITEM = {
    "type": "object",
    "properties": {"type": {"enum": list(_ITEMS)}},
    "required": ["type"],
    "allOf": [
        {
            "if": {"properties": {"type": {"const": kind}}},
            "then": {
                "properties": {"type": True, **properties, "annotations": _ANNOTATIONS},
                "required": _REQUIRED[kind],
                "additionalProperties": False,
            },
        }
        for kind, properties in _ITEMS.items()
    ],
}

_CALL = {
    "type": ["object", "null"],
    "properties": dict.fromkeys(("session_id", "agent", "message_id", "call_id"), _STRING),
    "required": ["session_id", "agent", "message_id", "call_id"],
    "additionalProperties": False,
}

_COMMON = {
    "version": {"const": VERSION},
    "status": {"enum": ["completed", "failed"]},
    "name": _OPTIONAL_STRING,
    "call": _CALL,
}

_COMPLETED = {
    "properties": {
        **_COMMON,
        # Written by earlier pegboards; the output is ephemeral and is not read back.
        "output": True,
        "content": {"type": "array", "items": _ITEM, "minItems": 1},
        "metadata": _OBJECT_OR_NULL,
        "provider_state": _OBJECT_OR_NULL,
    },
    "required": ["version", "status", "content"],
    "additionalProperties": False,
}

_FAILED = {
    "properties": {
        **_COMMON,
        "error": {
            "type": "object",
            "properties": {
                "kind": {"enum": list(get_args(ErrorKind))},
                "message": _STRING,
                "metadata": _OBJECT_OR_NULL,
            },
            "required": ["kind", "message"],
            "additionalProperties": False,
        },
        "partial": {"type": "array", "items": _ITEM},
    },
    "required": ["version", "status", "error", "partial"],
    "additionalProperties": False,
}

#: The JSON Schema of the stored form; `load_outcome` checks data against it.
SCHEMA: Final[Mapping[str, Any]] = freeze(
    {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": _COMMON,
        "required": ["version", "status"],
        "allOf": [
            {"if": {"properties": {"status": {"const": "completed"}}}, "then": _COMPLETED},
            {"if": {"properties": {"status": {"const": "failed"}}}, "then": _FAILED},
        ],
    }
)


@functools.cache
def _fast_validator() -> Any:
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(json.loads(json.dumps(SCHEMA)))


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    # Built on the first load: importing pegboard does not import jsonschema.
    import jsonschema

    return jsonschema.Draft202012Validator(SCHEMA)


def dump_outcome(outcome: Outcome) -> dict[str, Any]:
    """The stored form of ``outcome``: a plain JSON object, versioned.

    A success stores exactly its content plus optional metadata and provider
    state, never the ephemeral ``output`` (Code Mode's machine value): the
    outcome `load_outcome` returns has ``output=None`` and is otherwise equal,
    and renders exactly as the live one did. Bytes are base64 text; metadata
    and provider state are copied as plain JSON. The result survives
    ``json.dumps``/``json.loads``. Raises ``ValueError`` naming the path of a
    value that is not JSON (an outcome built by hand with, say, a ``set``), or
    for a success without content.
    """
    data: dict[str, Any] = {"version": VERSION}
    if isinstance(outcome, Completed):
        if not outcome.content:
            raise ValueError(
                "cannot store the outcome: a completed call carries non-empty content, "
                "this one has none"
            )
        data["status"] = "completed"
        data["content"] = [_dump_item(item) for item in outcome.content]
        data["metadata"] = _json("metadata", outcome.metadata)
        if outcome.provider_state is not None:
            data["provider_state"] = _json("provider_state", outcome.provider_state)
    elif isinstance(outcome, Failed):
        error = outcome.error
        data["status"] = "failed"
        data["error"] = {
            "kind": error.kind,
            "message": error.message,
            "metadata": _json("error.metadata", error.metadata),
        }
        data["partial"] = [_dump_item(item) for item in outcome.partial]
    else:
        raise TypeError(
            f"dump_outcome() takes a Completed or a Failed, got {type(outcome).__name__}"
        )
    data["name"] = outcome.name
    call = outcome.call
    data["call"] = (
        None
        if call is None
        else {
            "session_id": call.session_id,
            "agent": call.agent,
            "message_id": call.message_id,
            "call_id": call.call_id,
        }
    )
    return data


def load_outcome(data: Mapping[str, Any]) -> Outcome:
    """The outcome stored by `dump_outcome`.

    Raises ``ValueError`` naming the path of the first thing wrong: a missing
    or unknown field, a value of the wrong type, bad base64, a success with
    empty content, or a ``version`` this pegboard does not read. A stored
    ``output`` (earlier pegboards wrote one) is not read: the outcome's
    ``output`` is ``None``.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored outcome is a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != VERSION:
        raise ValueError(
            f"stored outcome at $.version: version {version!r} is not one this pegboard "
            f"reads (it reads version {VERSION}); load it with the pegboard that stored it"
        )
    if not _fast_validator().is_valid(data):  # jsonschema-rs accepts in microseconds
        import jsonschema.exceptions

        # jsonschema is the authority, and names the first thing wrong.
        error = jsonschema.exceptions.best_match(_validator().iter_errors(data))
        if error is not None:
            raise ValueError(f"stored outcome at {error.json_path}: {error.message}")
    call = data.get("call")
    identity = None if call is None else CallIdentity(**call)
    name = data.get("name")
    if data["status"] == "completed":
        return Completed(
            None,
            _load_items("$.content", data["content"]),
            _frozen("$.metadata", data.get("metadata")),
            call=identity,
            name=name,
            provider_state=_frozen("$.provider_state", data.get("provider_state")),
        )
    stored = data["error"]
    return Failed(
        ToolError(
            stored["kind"],
            stored["message"],
            metadata=_frozen("$.error.metadata", stored.get("metadata")),
        ),
        _load_items("$.partial", data["partial"]),
        call=identity,
        name=name,
    )


def _json(where: str, value: Any) -> Any:
    plain = thaw(value)
    problem = find_problem(plain, max_depth=_MAX_DEPTH)
    if problem is not None:
        path = where + problem.path[1:]
        raise ValueError(f"cannot store the outcome: {path} is not JSON: {problem.message}")
    return plain


def _frozen(where: str, value: Any) -> Any:
    problem = find_problem(value, max_depth=_MAX_DEPTH)
    if problem is not None:
        raise ValueError(f"stored outcome at {where}{problem.path[1:]}: {problem.message}")
    return freeze(value)


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decode(where: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"stored outcome at {where}: not valid base64") from None


def _dump_item(item: ContentItem) -> dict[str, Any]:
    data = _dump_fields(item)
    if item.annotations is not None:
        data["annotations"] = {
            key: list(value) if key == "audience" else value
            for key, value in attrs.asdict(item.annotations).items()
            if value is not None
        }
    return data


def _dump_fields(item: ContentItem) -> dict[str, Any]:
    if isinstance(item, Text):
        return {"type": "text", "text": item.text}
    if isinstance(item, Image | Audio):
        kind = "image" if isinstance(item, Image) else "audio"
        return {"type": kind, "data": _encode(item.data), "mime_type": item.mime_type}
    if isinstance(item, ResourceLink):
        return {
            "type": "resource_link",
            "uri": item.uri,
            "name": item.name,
            "title": item.title,
            "description": item.description,
            "mime_type": item.mime_type,
            "size": item.size,
        }
    if isinstance(item, EmbeddedResource):
        return {
            "type": "resource",
            "uri": item.uri,
            "text": item.text,
            "data": None if item.data is None else _encode(item.data),
            "mime_type": item.mime_type,
        }
    raise TypeError(f"{type(item).__name__} is not a pegboard content item")


def _load_items(where: str, items: list[dict[str, Any]]) -> tuple[ContentItem, ...]:
    loaded: list[ContentItem] = []
    for index, item in enumerate(items):
        path = f"{where}[{index}]"
        try:
            loaded.append(_load_item(path, item))
        except ValueError as error:
            if str(error).startswith("stored outcome at"):
                raise
            raise ValueError(f"stored outcome at {path}: {error}") from None
    return tuple(loaded)


def _load_item(path: str, item: dict[str, Any]) -> ContentItem:
    loaded = _load_fields(path, item)
    annotations = item.get("annotations")
    if annotations is None:
        return loaded
    return attrs.evolve(loaded, annotations=ContentAnnotations(**annotations))


def _load_fields(path: str, item: dict[str, Any]) -> ContentItem:
    kind = item["type"]
    if kind == "text":
        return Text(item["text"])
    if kind == "image":
        return Image(_decode(f"{path}.data", item["data"]), item["mime_type"])
    if kind == "audio":
        return Audio(_decode(f"{path}.data", item["data"]), item["mime_type"])
    if kind == "resource_link":
        return ResourceLink(
            uri=item["uri"],
            name=item["name"],
            title=item.get("title"),
            description=item.get("description"),
            mime_type=item.get("mime_type"),
            size=item.get("size"),
        )
    data = item.get("data")
    return EmbeddedResource(
        uri=item["uri"],
        text=item.get("text"),
        data=None if data is None else _decode(f"{path}.data", data),
        mime_type=item.get("mime_type"),
    )
