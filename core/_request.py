"""Requests: one model request's captured snapshot of a Location's tools."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import anyio

from ._outcome import CallIdentity, Outcome, ToolCall
from ._pipeline import Pipeline
from ._registry import Board
from ._tool import Tool, ToolContext, ToolDefinition

__all__ = ("Request", "Snapshot")


_ABSENT: Any = object()


class _Layered(Mapping[str, Tool]):
    """A read-only mapping: a shared base dict under a small overlay of changed names.

    ``None`` in the overlay means the name is gone.
    """

    __slots__ = ("_base", "_overlay", "_size")

    def __init__(self, base: dict[str, Tool], overlay: dict[str, Tool | None]) -> None:
        self._base = base
        self._overlay = overlay
        self._size = len(base) + sum(
            (tool is not None) - (name in base) for name, tool in overlay.items()
        )

    def get(self, name: str, default: Any = None) -> Any:
        tool = self._overlay.get(name, _ABSENT)
        if tool is _ABSENT:
            return self._base.get(name, default)
        return default if tool is None else tool

    def __getitem__(self, name: str) -> Tool:
        tool = self.get(name)
        if tool is None:
            raise KeyError(name)
        return tool  # type: ignore[no-any-return]

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        overlay = self._overlay
        yield from (name for name in self._base if name not in overlay)
        yield from (name for name, tool in overlay.items() if tool is not None)

    def __len__(self) -> int:
        return self._size


class Snapshot:
    """The effective tool of every name at one moment, and its definitions.

    Immutable, so every request prepared while the boards stay unchanged shares
    it. A snapshot taken after a few changes shares its predecessor's base and
    recomputes only the names the boards' logs say changed; the definitions
    are built when first read, reusing those of unchanged names.
    """

    __slots__ = ("_base", "_defined", "_definitions", "_marks", "_overlay", "tools")

    def __init__(
        self,
        base: dict[str, Tool],
        overlay: dict[str, Tool | None],
        marks: tuple[int, ...],
        defined: dict[str, tuple[Tool, ToolDefinition]],
    ) -> None:
        self._base = base
        self._overlay = overlay
        self._marks = marks
        #: Definitions built so far, by name, shared along a Location's snapshots.
        self._defined = defined
        self._definitions: tuple[ToolDefinition, ...] | None = None
        self.tools: Mapping[str, Tool] = _Layered(base, overlay) if overlay else base

    @classmethod
    def of(cls, boards: Iterable[Board], previous: Snapshot | None = None) -> Snapshot:
        """Merge ``boards``; a later board's winners take precedence."""
        boards = tuple(boards)
        if previous is not None and len(previous._marks) == len(boards):
            changed: set[str] = set()
            marks = []
            for board, mark in zip(boards, previous._marks, strict=True):
                end, names = board.changes(mark)
                if names is None:
                    break
                changed.update(names)
                marks.append(end)
            else:
                overlay = dict(previous._overlay)
                for name in changed:
                    overlay[name] = _effective(boards, name)
                base = previous._base
                # Folding the overlay in costs the whole base: done once it has
                # grown by a fraction of it, so each change costs O(1) amortized.
                if len(overlay) <= len(base) // 8 + 64:
                    return cls(base, overlay, tuple(marks), previous._defined)
        # Positions first: a change landing while the winners are read shows up next time.
        marks = [board.changes(0)[0] for board in boards]
        merged: dict[str, Tool] = {}
        for board in boards:
            merged.update(board.winners())
        defined = {} if previous is None else previous._defined
        for name in [name for name in defined if name not in merged]:
            del defined[name]
        return cls(merged, {}, tuple(marks), defined)

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The definitions of every name, sorted by name."""
        if self._definitions is None:
            tools = self.tools
            defined = self._defined
            definitions = []
            for name in sorted(tools):
                tool = tools[name]
                known = defined.get(name)
                if known is None or known[0] is not tool:
                    output = None if tool.output is None else tool.output.json_schema
                    definition = ToolDefinition(
                        name,
                        tool.description,
                        tool.input.json_schema,
                        output,
                        title=tool.title,
                        annotations=tool.annotations,
                    )
                    known = defined[name] = (tool, definition)
                definitions.append(known[1])
            self._definitions = tuple(definitions)
        return self._definitions


def _effective(boards: tuple[Board, ...], name: str) -> Tool | None:
    for board in reversed(boards):
        tool = board.winner(name)
        if tool is not None:
            return tool
    return None


class Request:
    """One model request: the definitions to advertise and the tools they captured.

    Calls execute the registration captured when the request was prepared;
    registration changes affect only later requests.
    """

    __slots__ = ("_definitions", "_pipeline", "_snapshot", "_tools", "_withdrawn", "final_step")

    def __init__(
        self,
        snapshot: Snapshot,
        pipeline: Pipeline,
        *,
        final_step: bool,
        definitions: tuple[ToolDefinition, ...] | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._snapshot = snapshot
        self._tools = snapshot.tools
        self.final_step = final_step
        self._definitions = definitions
        if definitions is None:
            self._withdrawn: frozenset[str] = frozenset()
        else:
            kept = {definition.name for definition in definitions}
            self._withdrawn = frozenset(name for name in snapshot.tools if name not in kept)

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The inert definitions to send to the provider, in a stable order."""
        if self._definitions is None:
            # Built when first read, once per snapshot: requests that only
            # execute calls never pay for them.
            self._definitions = self._snapshot.definitions
        return self._definitions

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
