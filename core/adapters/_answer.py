"""What an outcome tells the model, before any framework's types, and the call IDs to run it."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable

import pegboard

__all__ = ("OutcomeHook", "data_url", "fresh_id", "items", "media", "text_of", "text_only")

#: Called with every outcome an adapter settles, before the framework sees it.
OutcomeHook = Callable[[pegboard.Outcome], None]


def items(outcome: pegboard.Outcome) -> tuple[pegboard.ContentItem, ...]:
    """The content the model sees: a completed call's content, or for a failed one
    ``Error: <message>`` then the partial snapshot the tool reported before failing.
    """
    if isinstance(outcome, pegboard.Completed):
        return outcome.content or (pegboard.Text("(no content)"),)
    said: tuple[pegboard.ContentItem, ...] = (pegboard.Text(f"Error: {outcome.error.message}"),)
    if outcome.partial:
        said += (pegboard.Text("Output before the error:"), *outcome.partial)
    return said


def text_of(item: pegboard.ContentItem) -> str | None:
    """What a text-only item says, else ``None`` (for media)."""
    if isinstance(item, pegboard.Text):
        return item.text
    if isinstance(item, pegboard.ResourceLink):
        about = ", ".join(part for part in (item.title, item.mime_type, item.description) if part)
        return f"Resource link: {item.name} <{item.uri}>" + (f" ({about})" if about else "")
    if isinstance(item, pegboard.EmbeddedResource) and item.text is not None:
        return f"Resource {item.uri}:\n{item.text}"
    return None


def media(item: pegboard.ContentItem) -> tuple[str, bytes] | None:
    """The MIME type and bytes of a media item, else ``None``."""
    if isinstance(item, pegboard.Image | pegboard.Audio):
        return item.mime_type, item.data
    if isinstance(item, pegboard.EmbeddedResource) and item.data is not None:
        return item.mime_type or "application/octet-stream", item.data
    return None


def text_only(outcome: pegboard.Outcome) -> str:
    """The outcome as one text, media replaced by a note naming its type and size."""
    lines = []
    for item in items(outcome):
        said = text_of(item)
        if said is None:
            found = media(item)
            assert found is not None
            said = f"[{found[0]} content of {len(found[1])} bytes]"
        lines.append(said)
    return "\n".join(lines)


def data_url(mime_type: str, data: bytes) -> str:
    """Bytes as a ``data:`` URL."""
    return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"


def fresh_id(prefix: str) -> str:
    """An ID for a call the framework gave none."""
    return f"{prefix}-{uuid.uuid4().hex}"
