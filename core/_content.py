"""Model content: text and media items, and their one canonical form."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

import attrs

__all__ = (
    "Audio",
    "ContentItem",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "Text",
    "normalize_content",
)


def _mime(kind: str) -> Callable[[object, attrs.Attribute[str], object], None]:
    def check(_: object, attribute: attrs.Attribute[str], value: object) -> None:
        if not isinstance(value, str) or not value.startswith(f"{kind}/"):
            raise ValueError(f"{attribute.name} must be a {kind}/* MIME type, got {value!r}")

    return check


@attrs.frozen
class Text:
    """Text for the model. Only text is measured and bounded."""

    text: str = attrs.field(validator=attrs.validators.instance_of(str))


@attrs.frozen
class Image:
    """An image, passed to the model unchanged (its producer owns its size)."""

    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes), repr=False)
    mime_type: str = attrs.field(validator=_mime("image"))


@attrs.frozen
class Audio:
    """An audio clip, passed to the model unchanged."""

    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes), repr=False)
    mime_type: str = attrs.field(validator=_mime("audio"))


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the client can fetch, as MCP's ``resource_link``.

    ``description`` is text the model reads, bounded with the rest of it.
    """

    uri: str = attrs.field(validator=attrs.validators.instance_of(str))
    name: str = attrs.field(validator=attrs.validators.instance_of(str))
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@attrs.frozen(kw_only=True)
class EmbeddedResource:
    """A resource's contents carried inline, as MCP's ``resource``: ``text`` or ``data``.

    ``text`` is bounded with the rest of the model's text (an oversized one is
    retained and the item becomes a `ResourceLink` to ``uri``); ``data`` passes
    unbounded like media: its producer owns its size.
    """

    uri: str = attrs.field(validator=attrs.validators.instance_of(str))
    text: str | None = None
    data: bytes | None = attrs.field(default=None, repr=False)
    mime_type: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.data is None):
            raise ValueError("an EmbeddedResource carries exactly one of text or data")


ContentItem: TypeAlias = Text | Image | Audio | ResourceLink | EmbeddedResource
_ITEM_TYPES = (Text, Image, Audio, ResourceLink, EmbeddedResource)


def normalize_content(content: object) -> tuple[ContentItem, ...]:
    """The canonical form of content: a tuple of items without empty text.

    Accepts ``None``, a ``str``, one item, or a sequence of items and strings.
    """
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),) if content else ()
    if isinstance(content, _ITEM_TYPES):
        return () if isinstance(content, Text) and not content.text else (content,)
    if isinstance(content, Sequence):
        items: list[ContentItem] = []
        for index, item in enumerate(content):
            if isinstance(item, str):
                item = Text(item)
            elif not isinstance(item, _ITEM_TYPES):
                raise TypeError(
                    f"content[{index}] is a {type(item).__name__}; content items are str, "
                    "Text, Image, Audio, ResourceLink or EmbeddedResource"
                )
            if not (isinstance(item, Text) and not item.text):
                items.append(item)
        return tuple(items)
    raise TypeError(
        f"content is a {type(content).__name__}; give a str, a content item, or a sequence of them"
    )
