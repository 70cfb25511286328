"""OpenAI Chat Completions: function tools, ``tool_choice`` and tool messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pegboard

from ._answer import (
    Answer,
    answer,
    data_url,
    encoded,
    filename,
    interruption,
    left_out,
    media,
    text_of,
)
from ._names import OPENAI as NAMES
from ._names import OPENAI_MAX_TOOLS as MAX_TOOLS
from ._names import check_count, check_name
from ._search import no_native_search
from ._step import Found, field, plain, settle
from ._strict import OPENAI, parameters, strict_input

__all__ = ("interrupted", "result", "run_step", "strict_input", "tool_choice", "tools")

PROVIDER = "OpenAI Chat Completions"
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3"}
_FILES = frozenset({"application/pdf"})


def tools(
    request: pegboard.Request, *, strict: bool = False, native_search: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter: one ``ChatCompletionFunctionToolParam`` per definition.

    With ``strict=True`` each input schema is converted to OpenAI's strict
    subset; pass the arguments the model sends through `strict_input` before
    executing them. Raises `pegboard.providers.CompatibilityError` for a name
    or schema OpenAI cannot take, and past OpenAI's documented maximum of 128
    tools in one request. Deferred tools are found through the portable
    ``search_tools`` among the definitions: Chat Completions has no native tool
    search, so ``native_search=True`` raises `CompatibilityError`.
    """
    if native_search:
        raise no_native_search(PROVIDER)
    check_count([definition.name for definition in request.definitions], MAX_TOOLS, PROVIDER)
    rendered = []
    for definition in request.definitions:
        check_name(definition.name, NAMES, PROVIDER)
        function = {
            "name": definition.name,
            "description": definition.description,
            "parameters": parameters(definition, PROVIDER, OPENAI if strict else None),
            "strict": strict,
        }
        rendered.append({"type": "function", "function": function})
    return rendered


def tool_choice(request: pegboard.Request) -> Literal["auto", "none"] | None:
    """``"auto"``, ``"none"`` on the final step, or ``None`` (omit it) without tools."""
    return request.tool_choice if request.definitions else None


def result(outcome: pegboard.Outcome) -> list[dict[str, Any]]:
    """The messages answering the outcome's call.

    First the ``tool`` message (text only: OpenAI takes nothing else there),
    then, if the outcome has images, audio or PDF, a ``user`` message carrying
    them. With several calls in one turn, send every call's tool message before
    any of these user messages.
    """
    return _messages(answer(outcome))


def interrupted(call: pegboard.ToolCall, reason: str) -> list[dict[str, Any]]:
    """The messages answering a call that produced no outcome (OpenAI wants one per call)."""
    return _messages(interruption(call, reason))


def _messages(reply: Answer) -> list[dict[str, Any]]:
    texts: list[str] = []
    attached: list[dict[str, Any]] = []
    for item in reply.items:
        said = text_of(item)
        if said is not None:
            texts.append(said)
            continue
        found = media(item)
        assert found is not None
        mime_type, data = found
        part = _part(item, mime_type, data)
        if part is None:
            texts.append(left_out(mime_type, data, PROVIDER))
        else:
            attached.append(part)
            texts.append(f"[{mime_type} content: attached in the next message]")
    content: str | list[dict[str, Any]] = (
        texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
    )
    messages: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": reply.call_id, "content": content}
    ]
    if attached:
        named = f" ({reply.name})" if reply.name else ""
        intro = f"Content returned by tool call {reply.call_id}{named}:"
        messages.append({"role": "user", "content": [{"type": "text", "text": intro}, *attached]})
    return messages


def _part(item: pegboard.ContentItem, mime_type: str, data: bytes) -> dict[str, Any] | None:
    if mime_type in _IMAGES:
        return {"type": "image_url", "image_url": {"url": data_url(mime_type, data)}}
    if mime_type in _AUDIO:
        audio = {"data": encoded(data), "format": _AUDIO[mime_type]}
        return {"type": "input_audio", "input_audio": audio}
    if mime_type in _FILES:
        return {
            "type": "file",
            "file": {"file_data": data_url(mime_type, data), "filename": filename(item, mime_type)},
        }
    return None


async def run_step(
    request: pegboard.Request,
    response: object,
    *,
    session_id: str,
    agent: str,
    timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[pegboard.StepEvent], object] | None = None,
) -> list[dict[str, Any]]:
    """Execute every tool call of a ``ChatCompletion`` (the SDK object or its dict)
    concurrently and return the messages the host appends, in the order OpenAI
    requires: one ``tool`` message per call ID, in call order, then one ``user``
    message carrying the media of every call (each introduced by its call ID).

    Every call is answered whatever happens: its outcome; a call past
    ``timeout`` seconds, or whose tool raised (reported to ``on_event`` as a
    ``"defect"``), as interrupted; unknown and final-step calls as failures.
    The message ID of the calls is the completion's ``id``. Cancelling this
    cancels every call and propagates. Arguments go through `strict_input`, so
    tools rendered with ``strict=True`` need nothing more.
    """
    data = plain(response, PROVIDER)
    choices = field(data, "choices", "choices", PROVIDER)
    message = field(choices[0], "message", "choices[0].message", PROVIDER)
    found: list[Found] = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        name = function.get("name") or (call.get("custom") or {}).get("name") or ""
        arguments = function.get("arguments")
        if arguments is None:
            arguments = (call.get("custom") or {}).get("input") or ""
        if name and arguments:
            # Strict-mode nulls for omitted properties; other arguments come back as they are.
            arguments = strict_input(request, name, arguments)
        found.append((field(call, "id", "ID on a tool call", PROVIDER), name, arguments))
    answers = await settle(
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
    messages = [rendered[0] for rendered in answers]
    media = [part for rendered in answers for extra in rendered[1:] for part in extra["content"]]
    if media:  # one user message after every tool message, each call's media introduced
        messages.append({"role": "user", "content": media})
    return messages
