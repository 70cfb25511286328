"""Model content: text and media items, and their one canonical form."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Literal, TypeAlias

import attrs

__all__ = (
    "Audio",
    "ContentAnnotations",
    "ContentItem",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "Text",
    "normalize_content",
)


#: The longest MIME type a media item takes: RFC 6838 allows 127 characters for
#: each of type and subtype. The MIME type reaches the model as text (a provider
#: that cannot take the media names it instead), so it is bounded here.
_MAX_MIME_TYPE = 255


def _mime(kind: str) -> Callable[[object, attrs.Attribute[str], object], None]:
    def check(_: object, attribute: attrs.Attribute[str], value: object) -> None:
        if not isinstance(value, str) or not value.startswith(f"{kind}/"):
            raise ValueError(f"{attribute.name} must be a {kind}/* MIME type, got {_shown(value)}")
        if len(value) > _MAX_MIME_TYPE or not value.isprintable():
            raise ValueError(
                f"{attribute.name} must be a {kind}/* MIME type of at most {_MAX_MIME_TYPE} "
                f"printable characters on one line, got {_shown(value)}"
            )

    return check


def _shown(value: object) -> str:
    """``value`` for an error message, cut short when long."""
    text = repr(value)
    if len(text) <= 80:
        return text
    size = f" ({len(value):,} characters)" if isinstance(value, str) else ""
    return f"{text[:60]}...{size}"


def _audience(value: object) -> tuple[Literal["user", "assistant"], ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"audience is a sequence of 'user' and 'assistant', got {value!r}")
    roles = tuple(value)
    if not all(role in ("user", "assistant") for role in roles):
        raise ValueError(f"audience is a sequence of 'user' and 'assistant', got {value!r}")
    return roles


def _priority(_: object, attribute: attrs.Attribute[float | None], value: object) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
    ):
        raise ValueError(f"priority is a number from 0 to 1, got {value!r}")


@attrs.frozen(kw_only=True)
class ContentAnnotations:
    """Who a content item is for and how much it matters, as MCP's content ``annotations``.

    ``audience`` is who should see it (``"user"``, ``"assistant"``), ``priority``
    its importance from 0 (optional) to 1 (required), ``last_modified`` an ISO
    8601 time. Hints for the runner and client: pegboard itself only carries them.
    """

    audience: tuple[Literal["user", "assistant"], ...] | None = attrs.field(
        default=None, converter=_audience
    )
    priority: float | None = attrs.field(default=None, validator=_priority)
    last_modified: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )


_ANNOTATIONS = attrs.validators.optional(attrs.validators.instance_of(ContentAnnotations))


@attrs.frozen
class Text:
    """Text for the model. Only text is measured and bounded."""

    text: str = attrs.field(validator=attrs.validators.instance_of(str))
    annotations: ContentAnnotations | None = attrs.field(
        default=None, kw_only=True, validator=_ANNOTATIONS
    )


@attrs.frozen
class Image:
    """An image, passed to the model unchanged (its producer owns its size)."""

    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes), repr=False)
    mime_type: str = attrs.field(validator=_mime("image"))
    annotations: ContentAnnotations | None = attrs.field(
        default=None, kw_only=True, validator=_ANNOTATIONS
    )


@attrs.frozen
class Audio:
    """An audio clip, passed to the model unchanged."""

    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes), repr=False)
    mime_type: str = attrs.field(validator=_mime("audio"))
    annotations: ContentAnnotations | None = attrs.field(
        default=None, kw_only=True, validator=_ANNOTATIONS
    )


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
    annotations: ContentAnnotations | None = attrs.field(
        default=None, kw_only=True, validator=_ANNOTATIONS
    )


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
    annotations: ContentAnnotations | None = attrs.field(
        default=None, kw_only=True, validator=_ANNOTATIONS
    )

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
                    f"content[{index}] is {_kind(item)}; content items are str, "
                    "Text, Image, Audio, ResourceLink or EmbeddedResource"
                )
            if not (isinstance(item, Text) and not item.text):
                items.append(item)
        return tuple(items)
    raise TypeError(
        f"content is {_kind(content)}; give a str, a content item, or a sequence of them"
    )


def _kind(value: object) -> str:
    """What ``value`` is, for a message: "an int", "a coroutine (an await is missing)"."""
    if isinstance(value, Coroutine):
        value.close()  # it will never be awaited: closed, it warns no one at exit
        return "a coroutine (an await is missing where the tool returns it)"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
