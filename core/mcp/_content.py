"""Canonical content to MCP content blocks and back."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence

import mcp_types as types

from .._content import (
    Audio,
    ContentAnnotations,
    ContentItem,
    EmbeddedResource,
    Image,
    ResourceLink,
    Text,
)

__all__ = ("from_mcp_content", "to_mcp_content")


def to_mcp_content(content: Iterable[ContentItem]) -> list[types.ContentBlock]:
    """MCP content blocks for canonical content: text, base64 media, resources,
    each with its annotations.
    """
    return [_block(item) for item in content]


def _block(item: ContentItem) -> types.ContentBlock:
    annotations = _to_annotations(item.annotations)
    if isinstance(item, Text):
        return types.TextContent(text=item.text, annotations=annotations)
    if isinstance(item, Image):
        return types.ImageContent(
            data=_encode(item.data), mime_type=item.mime_type, annotations=annotations
        )
    if isinstance(item, Audio):
        return types.AudioContent(
            data=_encode(item.data), mime_type=item.mime_type, annotations=annotations
        )
    if isinstance(item, ResourceLink):
        return types.ResourceLink(
            uri=item.uri,
            name=item.name,
            title=item.title,
            description=item.description,
            mime_type=item.mime_type,
            size=item.size,
            annotations=annotations,
        )
    contents: types.TextResourceContents | types.BlobResourceContents
    if item.text is not None:
        contents = types.TextResourceContents(
            uri=item.uri, text=item.text, mime_type=item.mime_type
        )
    else:
        assert item.data is not None  # an EmbeddedResource carries text or data
        contents = types.BlobResourceContents(
            uri=item.uri, blob=_encode(item.data), mime_type=item.mime_type
        )
    return types.EmbeddedResource(resource=contents, annotations=annotations)


def from_mcp_content(blocks: Sequence[types.ContentBlock]) -> tuple[ContentItem, ...]:
    """Canonical content for MCP content blocks.

    Raises ``ValueError`` for a block pegboard cannot represent, or media that
    is not valid base64.
    """
    return tuple(_item(block) for block in blocks)


def _item(block: types.ContentBlock) -> ContentItem:
    if isinstance(block, types.TextContent):
        return Text(block.text, annotations=_from_annotations(block.annotations))
    if isinstance(block, types.ImageContent):
        return Image(
            _decode(block.data, "image"),
            block.mime_type,
            annotations=_from_annotations(block.annotations),
        )
    if isinstance(block, types.AudioContent):
        return Audio(
            _decode(block.data, "audio"),
            block.mime_type,
            annotations=_from_annotations(block.annotations),
        )
    if isinstance(block, types.ResourceLink):
        return ResourceLink(
            uri=str(block.uri),
            name=block.name,
            title=block.title,
            description=block.description,
            mime_type=block.mime_type,
            size=block.size,
            annotations=_from_annotations(block.annotations),
        )
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return EmbeddedResource(
                uri=str(resource.uri),
                text=resource.text,
                mime_type=resource.mime_type,
                annotations=_from_annotations(block.annotations),
            )
        return EmbeddedResource(
            uri=str(resource.uri),
            data=_decode(resource.blob, "resource"),
            mime_type=resource.mime_type,
            annotations=_from_annotations(block.annotations),
        )
    raise ValueError(f"cannot represent MCP content of type {getattr(block, 'type', block)!r}")


def _to_annotations(annotations: ContentAnnotations | None) -> types.Annotations | None:
    if annotations is None:
        return None
    return types.Annotations(
        audience=None if annotations.audience is None else list(annotations.audience),
        priority=annotations.priority,
        last_modified=annotations.last_modified,
    )


def _from_annotations(annotations: types.Annotations | None) -> ContentAnnotations | None:
    if annotations is None:
        return None
    kept = ContentAnnotations(
        audience=annotations.audience,
        priority=annotations.priority,
        last_modified=annotations.last_modified,
    )
    return None if kept == ContentAnnotations() else kept


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decode(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as error:
        raise ValueError(f"{what} data is not valid base64: {error}") from None
