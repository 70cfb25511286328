"""The OpenAI Agents SDK: a Location's tools as ``FunctionTool``s, strict where the schema allows.

Imports the SDK when imported (``pip install 'pegboard[openai-agents]'``).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pegboard
from pegboard.providers import CompatibilityError, openai_responses

from ._answer import OutcomeHook, data_url, items, media, text_of, text_only

try:
    from agents import (
        FunctionTool,
        ModelSettings,
        RunConfig,
        ToolOutputFileContent,
        ToolOutputImage,
        ToolOutputText,
    )
    from agents.run_config import ToolErrorFormatterArgs
    from agents.tool_context import ToolContext
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pegboard.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'pegboard[openai-agents]'"
    ) from error

__all__ = ("PegboardTools", "function_tools")

_log = logging.getLogger("pegboard")
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
Output = ToolOutputText | ToolOutputImage | ToolOutputFileContent


def function_tools(
    location: pegboard.Location,
    *,
    strict: bool = True,
    session_id: str = "openai-agents",
    final_step: bool = False,
    on_outcome: OutcomeHook | None = None,
) -> PegboardTools:
    """One ``FunctionTool`` per tool of ``location``, for an Agents SDK ``Agent(tools=...)``.

    The tools share one pegboard request, prepared now (with ``final_step``): call this
    again (and build the agent again) to follow registration changes. With
    ``strict=True`` each input schema is converted to OpenAI's strict profile by
    `pegboard.providers.openai_responses`, and a tool whose schema cannot be converted
    is sent as it is, not strict; the model's strict arguments go through
    ``strict_input`` before the pipeline checks them. Output schemas are not declared
    to the SDK: it validates every output against one and ends the run when a call
    fails, while pegboard answers with the call's content or error.

    Every call settles into its outcome; a failure reaches the model as
    ``Error: <message>`` with any partial output. A tool that raises does not abort the
    run: the exception is logged on the ``pegboard`` logger and the model is told the
    call failed. Cancellation propagates. The call's identity is ``session_id``, the
    agent's name, the function call item's ID and its call ID.

    Pass ``run_config=tools.run_config()`` to ``Runner.run``: a call to a tool the agent
    does not have is then answered with its pegboard ``unknown_tool`` outcome (given to
    ``on_outcome`` too) and the run goes on, and a final step says ``tool_choice="none"``.
    """
    request = location.prepare(final_step=final_step)
    return PegboardTools(
        [
            _function_tool(request, definition, strict, session_id, on_outcome)
            for definition in request.definitions
        ],
        request=request,
        session_id=session_id,
        on_outcome=on_outcome,
    )


class PegboardTools(list[FunctionTool]):
    """The tools `function_tools` made, and the run settings that answer every call."""

    def __init__(
        self,
        tools: list[FunctionTool],
        *,
        request: pegboard.Request,
        session_id: str,
        on_outcome: OutcomeHook | None,
    ) -> None:
        super().__init__(tools)
        self.request = request
        self._session_id = session_id
        self._on_outcome = on_outcome

    def run_config(self, **settings: Any) -> RunConfig:
        """A ``RunConfig`` (with ``settings``) under which unknown tool calls are answered
        by pegboard and the run goes on, and a final step asks for ``tool_choice="none"``.
        """
        if self.request.final_step:
            model_settings = settings.get("model_settings") or ModelSettings()
            settings["model_settings"] = model_settings.resolve(ModelSettings(tool_choice="none"))
        return RunConfig(
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self._formatted,
            **settings,
        )

    async def _formatted(self, error: ToolErrorFormatterArgs[Any]) -> str | None:
        if error.kind != "tool_not_found":
            return None  # the SDK's own words for what never reached pegboard
        wrapper = error.run_context
        agent = getattr(wrapper, "agent", None)
        call = pegboard.ToolCall(
            error.tool_name,
            "{}",
            pegboard.ToolContext(
                session_id=self._session_id,
                agent=getattr(agent, "name", None) or "agent",
                message_id=error.call_id,
                call_id=error.call_id,
            ),
        )
        outcome = await self.request.execute(call)
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        return text_only(outcome)


class _Definitions:
    """A request as the provider renderers read it, holding one definition."""

    def __init__(self, definition: pegboard.ToolDefinition) -> None:
        self.definitions = (definition,)


def _strict(definition: pegboard.ToolDefinition) -> dict[str, Any] | None:
    """The definition's input schema in OpenAI's strict profile, or ``None`` if it has none."""
    # The renderers take a request; one holding this definition alone lets each tool be
    # converted on its own, so one unconvertible tool leaves the others strict.
    one = cast("pegboard.Request", _Definitions(definition))
    try:
        [rendered] = openai_responses.tools(one, strict=True)
    except CompatibilityError as error:
        _log.info("tool %r is sent without strict mode: %s", definition.name, error)
        return None
    return cast("dict[str, Any]", rendered["parameters"])


def _function_tool(
    request: pegboard.Request,
    definition: pegboard.ToolDefinition,
    strict: bool,
    session_id: str,
    on_outcome: OutcomeHook | None,
) -> FunctionTool:
    name = definition.name
    parameters = _strict(definition) if strict else None

    async def invoke(context: ToolContext[Any], arguments: str) -> str | list[Output]:
        raw = arguments
        if parameters is not None:
            raw = cast("str", openai_responses.strict_input(request, name, arguments))
        item = context.tool_call
        agent = context.agent.name if context.agent is not None else "agent"
        call = pegboard.ToolCall(
            name,
            raw,
            pegboard.ToolContext(
                session_id=session_id,
                agent=agent,
                message_id=(item.id if item is not None and item.id else context.tool_call_id),
                call_id=context.tool_call_id,
            ),
        )
        try:
            outcome = await request.execute(call)
        except Exception as defect:  # noqa: BLE001 - the SDK would abort the whole run
            _log.exception("tool %r raised; the model is told the call failed", name)
            return f"Error: the tool failed unexpectedly ({defect!r}); it has no result"
        if on_outcome is not None:
            on_outcome(outcome)
        return _output(outcome)

    return FunctionTool(
        name=name,
        description=definition.description,
        params_json_schema=pegboard.thaw(definition.input_schema)
        if parameters is None
        else parameters,
        on_invoke_tool=invoke,
        strict_json_schema=parameters is not None,
    )


def _output(outcome: pegboard.Outcome) -> str | list[Output]:
    said = items(outcome)
    if not any(media(item) is not None for item in said):
        return text_only(outcome)
    parts: list[Output] = []
    for item in said:
        text = text_of(item)
        found = media(item)
        if text is not None or found is None:
            parts.append(ToolOutputText(text=text or ""))
        elif found[0] in _IMAGES:
            parts.append(ToolOutputImage(image_url=data_url(*found), detail="auto"))
        elif found[0] == "application/pdf":
            parts.append(ToolOutputFileContent(file_data=data_url(*found), filename="file.pdf"))
        else:
            parts.append(ToolOutputText(text=f"[{found[0]} content of {len(found[1])} bytes]"))
    return parts
