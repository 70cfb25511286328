"""Anthropic Messages: tools, ``tool_choice`` and ``tool_result`` blocks."""

from __future__ import annotations

from typing import Any

import pegboard

from ._answer import Answer, answer, encoded, interruption, left_out, media, text_of
from ._names import ANTHROPIC as NAMES
from ._names import check_name
from ._strict import ANTHROPIC, parameters

__all__ = ("interrupted", "result", "tool_choice", "tools")

PROVIDER = "Anthropic"
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def tools(request: pegboard.Request, *, strict: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter: one ``ToolParam`` per definition.

    With ``strict=True`` each tool says ``"strict": true`` and its schema is
    converted to Anthropic's strict subset (optional properties stay optional,
    so the model's input needs no translation). Raises
    `pegboard.providers.CompatibilityError` for a name or schema it cannot take.
    """
    rendered = []
    for definition in request.definitions:
        check_name(definition.name, NAMES, PROVIDER)
        tool: dict[str, Any] = {
            "name": definition.name,
            "description": definition.description,
            "input_schema": parameters(definition, PROVIDER, ANTHROPIC if strict else None),
        }
        if strict:
            tool["strict"] = True
        rendered.append(tool)
    return rendered


def tool_choice(request: pegboard.Request) -> dict[str, Any] | None:
    """``{"type": "auto"}``, ``{"type": "none"}`` on the final step, or ``None``
    (omit it) without tools: Anthropic takes objects, not the strings.
    """
    return {"type": request.tool_choice} if request.definitions else None


def result(outcome: pegboard.Outcome) -> dict[str, Any]:
    """The ``tool_result`` block answering the outcome's call, with ``is_error``.

    Text, images (PNG, JPEG, GIF, WebP) and PDF documents go in; other media
    (SVG, audio) is replaced by a note saying what was left out.
    """
    return _block(answer(outcome))


def interrupted(call: pegboard.ToolCall, reason: str) -> dict[str, Any]:
    """The block answering a call that produced no outcome (Anthropic wants one per call)."""
    return _block(interruption(call, reason))


def _block(reply: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for item in reply.items:
        said = text_of(item)
        if said is not None:
            content.append({"type": "text", "text": said})
            continue
        found = media(item)
        assert found is not None
        mime_type, data = found
        source = {"type": "base64", "media_type": mime_type, "data": encoded(data)}
        if mime_type in _IMAGES:
            content.append({"type": "image", "source": source})
        elif mime_type == "application/pdf":
            content.append({"type": "document", "source": source})
        else:
            content.append({"type": "text", "text": left_out(mime_type, data, PROVIDER)})
    return {
        "type": "tool_result",
        "tool_use_id": reply.call_id,
        "content": content,
        "is_error": reply.is_error,
    }
