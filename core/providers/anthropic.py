"""Anthropic Messages: tools, ``tool_choice`` and ``tool_result`` blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pegboard

from ._answer import Answer, answer, encoded, interruption, left_out, media, text_of
from ._names import ANTHROPIC as NAMES
from ._names import check_name
from ._search import native_parts
from ._step import Found, field, plain, settle
from ._strict import ANTHROPIC, parameters

__all__ = ("interrupted", "result", "run_step", "tool_choice", "tools")

PROVIDER = "Anthropic"
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


#: Anthropic's server tool that searches the tools sent with ``defer_loading``.
TOOL_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def tools(
    request: pegboard.Request, *, strict: bool = False, native_search: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter: one ``ToolParam`` per definition.

    A request with deferred tools advertises the portable ``search_tools``
    among its definitions. With ``native_search=True`` Anthropic's own tool
    search replaces it: each deferred tool is sent with ``"defer_loading":
    true``, followed by the BM25 tool search server tool. The tools it reveals
    are called like any other and execute from the same request.

    With ``strict=True`` each tool says ``"strict": true`` and its schema is
    converted to Anthropic's strict subset (optional properties stay optional,
    so the model's input needs no translation). Raises
    `pegboard.providers.CompatibilityError` for a name or schema it cannot take.
    """
    if not native_search or not request.deferred:
        return [_tool(definition, strict) for definition in request.definitions]
    advertised, deferred = native_parts(request)
    rendered = [_tool(definition, strict) for definition in advertised]
    rendered += [{**_tool(definition, strict), "defer_loading": True} for definition in deferred]
    rendered.append(dict(TOOL_SEARCH))
    return rendered


def _tool(definition: pegboard.ToolDefinition, strict: bool) -> dict[str, Any]:
    check_name(definition.name, NAMES, PROVIDER)
    tool: dict[str, Any] = {
        "name": definition.name,
        "description": definition.description,
        "input_schema": parameters(definition, PROVIDER, ANTHROPIC if strict else None),
    }
    if strict:
        tool["strict"] = True
    return tool


def tool_choice(request: pegboard.Request) -> dict[str, Any] | None:
    """``{"type": "auto"}``, ``{"type": "none"}`` on the final step, or ``None``
    (omit it) without tools: Anthropic takes objects, not the strings.
    """
    return {"type": request.tool_choice} if request.definitions else None


def result(outcome: pegboard.Outcome) -> dict[str, Any]:
    """The ``tool_result`` block answering the outcome's call, with ``is_error``.

    Text, images (PNG, JPEG, GIF, WebP) and PDF documents go in; other media
    (SVG, audio) is replaced by a note saying what was left out. A completed
    outcome's ``provider_state["anthropic"]`` (a list of content blocks the
    protocol needs verbatim, such as ``search_result`` blocks with citations)
    follows the content unchanged; other providers' state is ignored.
    """
    block = _block(answer(outcome))
    state = outcome.provider_state if isinstance(outcome, pegboard.Completed) else None
    if state is not None and "anthropic" in state:
        blocks = state["anthropic"]
        if not isinstance(blocks, list) or not all(isinstance(item, dict) for item in blocks):
            raise ValueError(
                "provider_state['anthropic'] is a list of tool_result content blocks "
                f"(objects), got {type(blocks).__name__}; fix the tool's ToolResponse"
            )
        block["content"].extend(pegboard.thaw(blocks))
    return block


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


async def run_step(
    request: pegboard.Request,
    response: object,
    *,
    session_id: str,
    agent: str,
    timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[pegboard.StepEvent], object] | None = None,
) -> list[dict[str, Any]]:
    """Execute every ``tool_use`` block of a ``Message`` (the SDK object or its dict)
    concurrently and return what the host appends: one ``user`` message whose
    content is a ``tool_result`` block per call ID, in call order (an empty list
    when the message has no tool use).

    Every call is answered whatever happens: its outcome; a call past
    ``timeout`` seconds, or whose tool raised (reported to ``on_event`` as a
    ``"defect"``), as interrupted; unknown and final-step calls as failures.
    The message ID of the calls is the message's ``id``. Cancelling this
    cancels every call and propagates.
    """
    data = plain(response, PROVIDER)
    found: list[Found] = [
        (
            field(block, "id", "ID on a tool_use block", PROVIDER),
            block.get("name") or "",
            block.get("input") or {},
        )
        for block in field(data, "content", "content", PROVIDER)
        if block.get("type") == "tool_use"
    ]
    blocks = await settle(
        request,
        found,
        session_id=session_id,
        agent=agent,
        message_id=data.get("id"),  # type: ignore[arg-type]
        timeout=timeout,
        on_event=on_event,
        result=result,
        interrupted=interrupted,
    )
    return [{"role": "user", "content": blocks}] if blocks else []
