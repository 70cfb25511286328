"""Gemini (google-genai): function declarations, tool config and function responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pegboard

from ._answer import Answer, answer, interruption, left_out, media, text_of
from ._names import GEMINI as NAMES
from ._names import GEMINI_MAX_TOOLS as MAX_TOOLS
from ._names import check_count, check_name
from ._search import no_native_search
from ._step import Found, field, plain, settle
from ._strict import parameters

__all__ = ("interrupted", "result", "run_step", "tool_choice", "tools")

PROVIDER = "Gemini"
_INLINE = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/webp",
        "image/heic",
        "image/heif",
        "audio/wav",
        "audio/mp3",
        "audio/mpeg",
        "audio/aiff",
        "audio/aac",
        "audio/ogg",
        "audio/flac",
        "application/pdf",
    }
)


def tools(
    request: pegboard.Request, *, strict: bool = False, native_search: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter: one ``Tool`` holding a ``FunctionDeclaration`` per
    definition, with ``parameters_json_schema`` and ``response_json_schema``.

    Gemini has no strict switch on a declaration (schema adherence is the
    ``VALIDATED`` function-calling mode), so ``strict`` changes nothing here.
    Raises `pegboard.providers.CompatibilityError` for a name or schema Gemini
    cannot take, and past Gemini's documented maximum of 512 function
    declarations. Deferred tools are found through the portable ``search_tools``
    among the definitions: Gemini has no native tool search, so
    ``native_search=True`` raises `CompatibilityError`.
    """
    if native_search:
        raise no_native_search(PROVIDER)
    check_count([definition.name for definition in request.definitions], MAX_TOOLS, PROVIDER)
    declarations = []
    for definition in request.definitions:
        check_name(definition.name, NAMES, PROVIDER)
        declaration: dict[str, Any] = {
            "name": definition.name,
            "description": definition.description,
            "parameters_json_schema": parameters(definition, PROVIDER, None),
        }
        if definition.output_schema is not None:
            declaration["response_json_schema"] = pegboard.thaw(definition.output_schema)
        declarations.append(declaration)
    return [{"function_declarations": declarations}] if declarations else []


def tool_choice(request: pegboard.Request) -> dict[str, Any] | None:
    """The ``tool_config``: function-calling mode ``AUTO``, ``NONE`` on the final
    step, or ``None`` (omit it) without tools.
    """
    if not request.definitions:
        return None
    return {"function_calling_config": {"mode": request.tool_choice.upper()}}


def result(outcome: pegboard.Outcome) -> list[dict[str, Any]]:
    """The parts answering the outcome's call: a ``function_response`` part (with the
    call ID and the tool name) whose response is ``{"output": text}`` or
    ``{"error": text}``, then one ``inline_data`` part per image, audio clip or
    PDF Gemini takes (``data`` as bytes, as the SDK's ``Blob`` wants).
    """
    reply = answer(outcome)
    if reply.name is None:
        raise ValueError(
            "Gemini answers a call by tool name; this outcome has none (outcome.name), "
            "as only an outcome built by hand can lack it"
        )
    return _parts(reply, reply.name)


def interrupted(call: pegboard.ToolCall, reason: str) -> list[dict[str, Any]]:
    """The parts answering a call that produced no outcome."""
    reply = interruption(call, reason)
    return _parts(reply, call.name)


def _parts(reply: Answer, name: str) -> list[dict[str, Any]]:
    texts: list[str] = []
    inline: list[dict[str, Any]] = []
    for item in reply.items:
        said = text_of(item)
        if said is not None:
            texts.append(said)
            continue
        found = media(item)
        assert found is not None
        mime_type, data = found
        if mime_type in _INLINE:
            inline.append({"inline_data": {"mime_type": mime_type, "data": data}})
            texts.append(f"[{mime_type} content: attached after this response]")
        else:
            texts.append(left_out(mime_type, data, PROVIDER))
    key = "error" if reply.is_error else "output"
    response = {"id": reply.call_id, "name": name, "response": {key: "\n".join(texts)}}
    return [{"function_response": response}, *inline]


async def run_step(
    request: pegboard.Request,
    response: object,
    *,
    session_id: str,
    agent: str,
    timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[pegboard.StepEvent], object] | None = None,
) -> list[dict[str, Any]]:
    """Execute every ``function_call`` part of a ``GenerateContentResponse`` (the
    SDK object or its dict) concurrently and return what the host appends: one
    ``user`` content whose parts are a ``function_response`` per call, in call
    order, then the media parts (an empty list without function calls).

    Every call is answered whatever happens: its outcome; a call past
    ``timeout`` seconds, or whose tool raised (reported to ``on_event`` as a
    ``"defect"``), as interrupted; unknown and final-step calls as failures.
    The message ID of the calls is the response's ``response_id``. A call the
    model sent without an ID gets ``<response_id>:<index>`` as its call ID, and
    its answer carries no ID, as the model sent none. Cancelling this cancels
    every call and propagates.
    """
    data = plain(response, PROVIDER)
    candidates = field(data, "candidates", "candidates", PROVIDER)
    content = field(candidates[0], "content", "candidates[0].content", PROVIDER)
    message_id = data.get("response_id")
    found: list[Found] = []
    anonymous: set[str] = set()
    for index, part in enumerate(content.get("parts") or ()):
        call = part.get("function_call")
        if not call:
            continue
        call_id = call.get("id")
        if not call_id:
            call_id = f"{message_id}:{index}"
            anonymous.add(call_id)
        found.append((call_id, call.get("name") or "", call.get("args") or {}))
    answers = await settle(
        request,
        found,
        session_id=session_id,
        agent=agent,
        message_id=message_id,  # type: ignore[arg-type]
        timeout=timeout,
        on_event=on_event,
        result=result,
        interrupted=interrupted,
    )
    if not answers:
        return []
    for rendered in answers:
        response_part = rendered[0]["function_response"]
        if response_part["id"] in anonymous:
            del response_part["id"]
    parts = [rendered[0] for rendered in answers]
    parts += [extra for rendered in answers for extra in rendered[1:]]
    return [{"role": "user", "parts": parts}]
