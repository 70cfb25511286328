"""pydantic-ai: a Location's tools as an ``AbstractToolset``, one pegboard request per model step.

Imports pydantic-ai when imported (``pip install 'pegboard[pydantic-ai]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pegboard

from ._answer import OutcomeHook, items, media, text_of

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ModelRetry, ToolFailed
    from pydantic_ai.messages import BinaryContent, ToolReturn
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pegboard.adapters.pydantic_ai needs pydantic-ai: pip install 'pegboard[pydantic-ai]'"
    ) from error

__all__ = ("Toolset",)

# The pipeline validates every input against the tool's own schema and says what is
# wrong in pegboard's words; pydantic-ai only has to hand over a JSON object.
_ANY_OBJECT = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)
# Failures the model can fix by calling again differently: pydantic-ai's retry.
_RETRY = frozenset({"invalid_input", "unknown_tool"})

FinalStep = Callable[[RunContext[Any]], bool]


class Toolset(AbstractToolset[Any]):
    """The tools of ``location`` for a pydantic-ai agent.

    At the start of each model step the toolset prepares one pegboard request, so the
    step advertises and executes that step's snapshot. ``invalid_input`` and
    ``unknown_tool`` failures become `ModelRetry` (they count against ``max_retries``);
    every other failure becomes `ToolFailed`, with the partial output the tool reported
    before failing. A completed call returns a `ToolReturn` whose content is text and
    `BinaryContent` and whose ``metadata`` is the pegboard outcome, for the host.

    ``final_step(ctx)`` says whether a step is the last one: that step's request is
    prepared with ``final_step=True`` and `model_settings` says ``tool_choice="none"``.
    ``on_outcome`` is called with every outcome. Call identity: ``session_id`` (default:
    the conversation ID, else the run ID), ``agent`` (default: the agent's name),
    ``message_id`` ``<run id>/step-<n>`` and pydantic-ai's tool call ID.
    """

    def __init__(
        self,
        location: pegboard.Location,
        *,
        id: str | None = None,
        session_id: str | None = None,
        agent: str | None = None,
        max_retries: int = 1,
        final_step: FinalStep | None = None,
        on_outcome: OutcomeHook | None = None,
    ) -> None:
        self.location = location
        self._id = id
        self._session_id = session_id
        self._agent = agent
        self.max_retries = max_retries
        self._final_step = final_step
        self._on_outcome = on_outcome

    @property
    def id(self) -> str | None:
        return self._id

    def is_final_step(self, ctx: RunContext[Any]) -> bool:
        """Whether the step ``ctx`` belongs to is the final one."""
        return self._final_step is not None and self._final_step(ctx)

    def model_settings(self, ctx: RunContext[Any]) -> ModelSettings:
        """Per-step model settings: ``tool_choice="none"`` on the final step.

        Pass the method itself as the agent's ``model_settings``.
        """
        return ModelSettings(tool_choice="none") if self.is_final_step(ctx) else ModelSettings()

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return _Step(self, self.location.prepare(final_step=self.is_final_step(ctx)))

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return await _Step(
            self, self.location.prepare(final_step=self.is_final_step(ctx))
        ).get_tools(ctx)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        step = _Step(self, self.location.prepare(final_step=self.is_final_step(ctx)))
        return await step.call_tool(name, tool_args, ctx, tool)

    def identity(self, ctx: RunContext[Any]) -> pegboard.ToolContext:
        """The runner context of the call ``ctx`` describes."""
        run = ctx.run_id or "run"
        named = ctx.agent.name if ctx.agent is not None else None
        return pegboard.ToolContext(
            session_id=self._session_id or ctx.conversation_id or run,
            agent=self._agent or named or "agent",
            message_id=f"{run}/step-{ctx.run_step}",
            call_id=ctx.tool_call_id or "call",
        )

    def settle(self, outcome: pegboard.Outcome) -> Any:
        """What pydantic-ai gets for ``outcome``: a `ToolReturn`, or the error to raise."""
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        if isinstance(outcome, pegboard.Failed):
            said = "\n".join(_text(item) for item in items(outcome))
            if outcome.error.kind in _RETRY:
                raise ModelRetry(outcome.error.message)
            raise ToolFailed(said)
        content = [_content(item) for item in outcome.content]
        value: Any = content[0] if len(content) == 1 else content
        return ToolReturn(return_value=value, metadata=outcome)


class _Step(AbstractToolset[Any]):
    """One model step: the request prepared for it, advertised and executed."""

    def __init__(self, toolset: Toolset, request: pegboard.Request) -> None:
        self.toolset = toolset
        self.request = request

    @property
    def id(self) -> str | None:
        return self.toolset.id

    @property
    def label(self) -> str:
        return self.toolset.label

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return await self.toolset.for_run_step(ctx)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            definition.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=definition.name,
                    description=definition.description,
                    parameters_json_schema=pegboard.thaw(definition.input_schema),
                    return_schema=(
                        None
                        if definition.output_schema is None
                        else pegboard.thaw(definition.output_schema)
                    ),
                ),
                max_retries=self.toolset.max_retries,
                args_validator=_ANY_OBJECT,
            )
            for definition in self.request.definitions
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call = pegboard.ToolCall(name, tool_args, self.toolset.identity(ctx))
        return self.toolset.settle(await self.request.execute(call))


def _text(item: pegboard.ContentItem) -> str:
    said = text_of(item)
    if said is not None:
        return said
    found = media(item)
    assert found is not None
    return f"[{found[0]} content of {len(found[1])} bytes]"


def _content(item: pegboard.ContentItem) -> str | BinaryContent:
    said = text_of(item)
    if said is not None:
        return said
    found = media(item)
    assert found is not None
    return BinaryContent(data=found[1], media_type=found[0])
