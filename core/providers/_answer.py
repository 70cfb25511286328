"""The answer to one call, before any wire format: whose, whether an error, what to show."""

from __future__ import annotations

import base64

import attrs

import pegboard

__all__ = (
    "Answer",
    "answer",
    "data_url",
    "encoded",
    "filename",
    "interruption",
    "left_out",
    "media",
    "shown",
    "text_of",
)


@attrs.frozen
class Answer:
    """One call's answer: the call ID, the tool name, whether it failed, its items.

    Metadata is not here: it is for the host, never for the model.
    """

    call_id: str
    name: str | None
    is_error: bool
    items: tuple[pegboard.ContentItem, ...]


def answer(outcome: pegboard.Outcome) -> Answer:
    """The answer an outcome gives: its content, or its error then its partial snapshot."""
    if not isinstance(outcome, pegboard.Completed | pegboard.Failed):
        raise TypeError(f"result() takes a pegboard outcome, got {type(outcome).__name__}")
    if outcome.call is None:
        raise ValueError(
            "result() needs the outcome's call identity (outcome.call) to name the call it "
            "answers; outcomes from request.execute() and load_outcome() of them carry one"
        )
    failed = isinstance(outcome, pegboard.Failed)
    return Answer(outcome.call.call_id, outcome.name, failed, shown(outcome))


def shown(outcome: pegboard.Outcome) -> tuple[pegboard.ContentItem, ...]:
    """What the model is shown: a completed call's content, or for a failed one
    ``Error: <message>`` then the partial snapshot the tool reported before failing.
    """
    if isinstance(outcome, pegboard.Completed):
        return outcome.content or (pegboard.Text("(no content)"),)
    error: tuple[pegboard.ContentItem, ...] = (pegboard.Text(f"Error: {outcome.error.message}"),)
    if outcome.partial:
        error += (pegboard.Text("Output before the error:"), *outcome.partial)
    return error


def interruption(call: pegboard.ToolCall, reason: str) -> Answer:
    """The answer for a call that produced no outcome (cancelled, or its tool raised)."""
    if not isinstance(call, pegboard.ToolCall):
        raise TypeError(f"interrupted() takes the pegboard.ToolCall, got {type(call).__name__}")
    text = f"The call to {call.name!r} did not finish and has no result: {reason}"
    return Answer(call.context.call_id, call.name, True, (pegboard.Text(text),))


def media(item: pegboard.ContentItem) -> tuple[str, bytes] | None:
    """The MIME type and bytes of an item a provider may take as media, else ``None``."""
    if isinstance(item, pegboard.Image | pegboard.Audio):
        return item.mime_type, item.data
    if isinstance(item, pegboard.EmbeddedResource) and item.data is not None:
        return item.mime_type or "application/octet-stream", item.data
    return None


def text_of(item: pegboard.ContentItem) -> str | None:
    """What a text-only item says, else ``None`` (for media)."""
    if isinstance(item, pegboard.Text):
        return item.text
    if isinstance(item, pegboard.ResourceLink):
        words = [f"Resource link: {item.name}"]
        if item.title:
            words.append(f" ({item.title})")
        words.append(f" <{item.uri}>")
        about = [part for part in (item.mime_type, _size(item.size)) if part]
        if about:
            words.append(f" [{', '.join(about)}]")
        if item.description:
            words.append(f": {item.description}")
        return "".join(words)
    if isinstance(item, pegboard.EmbeddedResource) and item.text is not None:
        kind = f" ({item.mime_type})" if item.mime_type else ""
        return f"Resource {item.uri}{kind}:\n{item.text}"
    return None


def _size(size: int | None) -> str | None:
    return None if size is None else f"{size} bytes"


def left_out(mime_type: str, data: bytes, provider: str) -> str:
    """The note that replaces media a provider cannot take."""
    return (
        f"[{mime_type} content of {len(data)} bytes left out: {provider} cannot take it "
        "in a tool result]"
    )


def encoded(data: bytes) -> str:
    """Bytes as base64 text."""
    return base64.b64encode(data).decode("ascii")


def data_url(mime_type: str, data: bytes) -> str:
    """Bytes as a ``data:`` URL."""
    return f"data:{mime_type};base64,{encoded(data)}"


def filename(item: pegboard.ContentItem, mime_type: str) -> str:
    """A file name for media sent as a file: the resource's last path part, or one made up."""
    if isinstance(item, pegboard.EmbeddedResource):
        last = item.uri.rstrip("/").rsplit("/", 1)[-1]
        if last and ":" not in last:
            return last
    return "attachment." + mime_type.rsplit("/", 1)[-1].split("+", 1)[0]
