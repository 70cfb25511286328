"""Requests: one model request's captured snapshot of a Location's tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import anyio
import attrs

from ._outcome import CallIdentity, Outcome, ToolCall
from ._pipeline import Pipeline
from ._registry import Board
from ._tool import Tool, ToolContext, ToolDefinition

__all__ = ("Request", "Snapshot")


@attrs.frozen
class Snapshot:
    """The effective tool of every name at one moment, and its definitions.

    Immutable, so every request prepared while the boards stay unchanged shares it.
    """

    tools: Mapping[str, Tool]
    definitions: tuple[ToolDefinition, ...]

    @classmethod
    def of(cls, boards: Iterable[Board], previous: Snapshot | None = None) -> Snapshot:
        """Merge ``boards``; a later board's winners take precedence.

        Definitions of unchanged names are reused from ``previous``.
        """
        merged: dict[str, Tool] = {}
        for board in boards:
            merged.update(board.winners())
        names = sorted(merged)
        reuse = {} if previous is None else previous._by_name()
        definitions = []
        for name in names:
            tool = merged[name]
            known = reuse.get(name)
            if known is None or previous is None or previous.tools[name] is not tool:
                output = None if tool.output is None else tool.output.json_schema
                known = ToolDefinition(
                    name,
                    tool.description,
                    tool.input.json_schema,
                    output,
                    title=tool.title,
                    annotations=tool.annotations,
                )
            definitions.append(known)
        return cls({name: merged[name] for name in names}, tuple(definitions))

    def _by_name(self) -> dict[str, ToolDefinition]:
        return {definition.name: definition for definition in self.definitions}


class Request:
    """One model request: the definitions to advertise and the tools they captured.

    Calls execute the registration captured when the request was prepared;
    registration changes affect only later requests.
    """

    __slots__ = ("_pipeline", "_tools", "_withdrawn", "definitions", "final_step")

    def __init__(
        self,
        snapshot: Snapshot,
        pipeline: Pipeline,
        *,
        final_step: bool,
        definitions: tuple[ToolDefinition, ...] | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._tools = snapshot.tools
        self.final_step = final_step
        #: The inert definitions to send to the provider, in a stable order.
        if definitions is None:
            self.definitions = snapshot.definitions
            self._withdrawn: frozenset[str] = frozenset()
        else:
            self.definitions = definitions
            kept = {definition.name for definition in definitions}
            self._withdrawn = frozenset(name for name in snapshot.tools if name not in kept)

    @property
    def tool_choice(self) -> Literal["auto", "none"]:
        """``"none"`` on the final step (definitions stay, so a cached prompt prefix
        survives), else ``"auto"``.
        """
        return "none" if self.final_step else "auto"

    async def execute(self, call: ToolCall) -> Outcome:
        """Run ``call`` through the pipeline and return its one outcome.

        Cancellation propagates as cancellation; an unexpected exception from
        the tool propagates unchanged; `pegboard.RetentionError` means the
        outcome could not be retained whole.
        """
        if not isinstance(call, ToolCall) or not isinstance(call.context, ToolContext):
            raise TypeError("execute() takes a pegboard.ToolCall with a pegboard.ToolContext")
        identity = CallIdentity.of(call.context)
        name = call.name
        tool = self._tools.get(name)
        if self.final_step:
            return await self._pipeline.fail(
                identity,
                name,
                "final_step",
                f"tool {name!r} was not run: this is the final step, which allows no tool "
                "calls; answer with what you have",
            )
        if tool is None or name in self._withdrawn:
            if name in self._withdrawn:
                return await self._pipeline.fail(
                    identity,
                    name,
                    "unavailable",
                    f"tool {name!r} is not available for this request; use another tool",
                )
            known = ", ".join(definition.name for definition in self.definitions[:20])
            return await self._pipeline.fail(
                identity,
                name,
                "unknown_tool",
                f"there is no tool named {name!r}; available tools: {known or '(none)'}",
            )
        return await self._pipeline.run(name, tool, call, identity)

    async def execute_all(self, calls: Iterable[ToolCall]) -> list[Outcome]:
        """Run one step's calls concurrently and return their outcomes in call order.

        Each call goes through `execute`, all in one anyio task group, so a call
        that is rejected or fails still leaves the others to finish. A defect
        is different: when a call raises (its tool raised an unexpected
        exception, or `pegboard.RetentionError`), the calls still running are
        cancelled, no outcome is returned, and the exception propagates
        unchanged; if several calls raised at once, they propagate together as
        an ``ExceptionGroup``. Cancelling the caller cancels every call and
        propagates as cancellation. A runner that must answer each call on its
        own runs `execute` per call instead (see docs/providers.md).
        """
        batch = list(calls)
        for call in batch:
            if not isinstance(call, ToolCall) or not isinstance(call.context, ToolContext):
                raise TypeError(
                    "execute_all() takes pegboard.ToolCall values with a pegboard.ToolContext"
                )
        if len(batch) <= 1:
            return [await self.execute(call) for call in batch]
        outcomes: list[Outcome | None] = [None] * len(batch)
        defects: list[Exception] = []

        async def run(index: int, call: ToolCall, scope: anyio.CancelScope) -> None:
            try:
                outcomes[index] = await self.execute(call)
            except Exception as defect:  # noqa: BLE001 - re-raised below, once siblings stop
                defects.append(defect)
                scope.cancel()

        async with anyio.create_task_group() as group:
            for index, call in enumerate(batch):
                group.start_soon(run, index, call, group.cancel_scope)
        # Raised here, outside any handler, so the exception keeps its own
        # cause and context: it propagates as execute() would have raised it.
        if len(defects) == 1:
            raise defects[0]
        if defects:
            raise ExceptionGroup(f"{len(defects)} tool calls of one step raised", defects)
        return [outcome for outcome in outcomes if outcome is not None]

    def __repr__(self) -> str:
        names = [definition.name for definition in self.definitions]
        return f"<Request tools={names!r} tool_choice={self.tool_choice!r}>"
