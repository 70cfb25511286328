"""OpenAI Responses: function tools, ``tool_choice`` and ``function_call_output`` items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pegboard

from ._answer import Answer, answer, data_url, filename, interruption, left_out, media, text_of
from ._names import OPENAI as NAMES
from ._names import OPENAI_MAX_TOOLS as MAX_TOOLS
from ._names import check_count, check_name
from ._search import native_parts
from ._step import Found, field, plain, settle
from ._strict import OPENAI, parameters, strict_input

__all__ = ("interrupted", "result", "run_step", "strict_input", "tool_choice", "tools")

PROVIDER = "OpenAI Responses"
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_FILES = frozenset({"application/pdf"})


#: OpenAI's hosted tool search over the functions sent with ``defer_loading``.
TOOL_SEARCH = {"type": "tool_search"}


def tools(
    request: pegboard.Request, *, strict: bool = False, native_search: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` parameter: one ``FunctionToolParam`` per definition, with its
    ``output_schema`` when the tool has one.

    A request with deferred tools advertises the portable ``search_tools``
    among its definitions. With ``native_search=True`` OpenAI's hosted tool
    search replaces it: each deferred function is sent with
    ``"defer_loading": true``, followed by the ``tool_search`` tool. The
    functions it reveals are called like any other and execute from the same
    request.

    With ``strict=True`` each input schema is converted to OpenAI's strict
    subset; pass the arguments the model sends through `strict_input` before
    executing them. Raises `pegboard.providers.CompatibilityError` for a name
    or schema OpenAI cannot take, and past OpenAI's documented maximum of 128
    tools sent in full in one request.
    """
    if not native_search or not request.deferred:
        check_count([definition.name for definition in request.definitions], MAX_TOOLS, PROVIDER)
        return [_function(definition, strict) for definition in request.definitions]
    advertised, deferred = native_parts(request)
    # Deferred functions are loaded by the hosted search: only the others count.
    check_count([definition.name for definition in advertised], MAX_TOOLS, PROVIDER)
    rendered = [_function(definition, strict) for definition in advertised]
    rendered += [{**_function(d, strict), "defer_loading": True} for d in deferred]
    rendered.append(dict(TOOL_SEARCH))
    return rendered


def _function(definition: pegboard.ToolDefinition, strict: bool) -> dict[str, Any]:
    check_name(definition.name, NAMES, PROVIDER)
    tool: dict[str, Any] = {
        "type": "function",
        "name": definition.name,
        "description": definition.description,
        "parameters": parameters(definition, PROVIDER, OPENAI if strict else None),
        "strict": strict,
    }
    if definition.output_schema is not None:
        tool["output_schema"] = pegboard.thaw(definition.output_schema)
    return tool


def tool_choice(request: pegboard.Request) -> Literal["auto", "none"] | None:
    """``"auto"``, ``"none"`` on the final step, or ``None`` (omit it) without tools."""
    return request.tool_choice if request.definitions else None


def result(outcome: pegboard.Outcome) -> dict[str, Any]:
    """The ``function_call_output`` item answering the outcome's call.

    Its output is one string when the outcome is one text, else a list of
    ``input_text``, ``input_image`` and ``input_file`` parts; audio is replaced
    by a note.
    """
    return _item(answer(outcome))


def interrupted(call: pegboard.ToolCall, reason: str) -> dict[str, Any]:
    """The item answering a call that produced no outcome (OpenAI wants one per call)."""
    return _item(interruption(call, reason))


def _item(reply: Answer) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for item in reply.items:
        said = text_of(item)
        if said is not None:
            parts.append({"type": "input_text", "text": said})
            continue
        found = media(item)
        assert found is not None
        mime_type, data = found
        if mime_type in _IMAGES:
            url = data_url(mime_type, data)
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif mime_type in _FILES:
            parts.append(
                {
                    "type": "input_file",
                    "file_data": data_url(mime_type, data),
                    "filename": filename(item, mime_type),
                }
            )
        else:
            parts.append({"type": "input_text", "text": left_out(mime_type, data, PROVIDER)})
    output: str | list[dict[str, Any]] = (
        parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "input_text" else parts
    )
    return {"type": "function_call_output", "call_id": reply.call_id, "output": output}


async def run_step(
    request: pegboard.Request,
    response: object,
    *,
    session_id: str,
    agent: str,
    timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[pegboard.StepEvent], object] | None = None,
) -> list[dict[str, Any]]:
    """Execute every ``function_call`` item of a ``Response`` (the SDK object or its
    dict) concurrently and return the ``function_call_output`` items the host
    appends to its input, one per call ID, in call order.

    Every call is answered whatever happens: its outcome; a call past
    ``timeout`` seconds, or whose tool raised (reported to ``on_event`` as a
    ``"defect"``), as interrupted; unknown and final-step calls as failures.
    The message ID of the calls is the response's ``id``. Cancelling this
    cancels every call and propagates. Arguments go through `strict_input`.
    """
    data = plain(response, PROVIDER)
    found: list[Found] = []
    for item in field(data, "output", "output", PROVIDER):
        if item.get("type") != "function_call":
            continue  # messages, reasoning, hosted tools: nothing to answer
        name, arguments = item.get("name") or "", item.get("arguments") or ""
        if name and arguments:
            arguments = strict_input(request, name, arguments)
        found.append(
            (field(item, "call_id", "call_id on a function_call", PROVIDER), name, arguments)
        )
    return await settle(
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
