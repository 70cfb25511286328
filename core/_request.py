"""Requests: one model request's captured snapshot of a Location's tools."""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import anyio

from ._deferral import (
    SEARCH_DEFINITION,
    SEARCH_TOOLS,
    ToolBudget,
    definition_characters,
    search_tool,
)
from ._outcome import CallIdentity, Outcome, ToolCall
from ._permissions import PermissionRejected
from ._pipeline import Pipeline
from ._registry import Board
from ._tool import Tool, ToolContext, ToolDefinition
from ._tracing import instruments, traced

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._journal import CallJournal
    from ._search import SearchIndex
    from ._step import StepEvent

__all__ = ("Request", "Snapshot")


_ABSENT: Any = object()


class _Layered(Mapping[str, Tool]):
    """A read-only mapping: a full base dict under a few smaller layers of changed names.

    A later layer takes precedence; ``None`` in a layer means the name is gone.
    """

    __slots__ = ("_layers", "_size")

    def __init__(self, layers: tuple[dict[str, Tool | None], ...], size: int) -> None:
        self._layers = layers
        self._size = size

    def get(self, name: str, default: Any = None) -> Any:
        for layer in reversed(self._layers):
            tool = layer.get(name, _ABSENT)
            if tool is not _ABSENT:
                return default if tool is None else tool
        return default

    def __getitem__(self, name: str) -> Tool:
        tool = self.get(name)
        if tool is None:
            raise KeyError(name)
        return tool  # type: ignore[no-any-return]

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for layer in reversed(self._layers):
            for name, tool in layer.items():
                if name not in seen:
                    seen.add(name)
                    if tool is not None:
                        yield name

    def __len__(self) -> int:
        return self._size


class Snapshot:
    """The effective tool of every name at one moment, and its definitions.

    Immutable, so every request prepared while the boards stay unchanged shares
    it. A snapshot taken after a few changes shares its predecessor's layers
    and adds one holding only the names the boards' logs say changed; the
    definitions are built when first read, reusing those of unchanged names.
    """

    __slots__ = (
        "_basis",
        "_characters",
        "_defined",
        "_definitions",
        "_index",
        "_layers",
        "_marks",
        "tools",
    )

    def __init__(
        self,
        layers: tuple[dict[str, Tool | None], ...],
        size: int,
        marks: tuple[int, ...] = (),
        defined: dict[str, tuple[Tool, ToolDefinition]] | None = None,
    ) -> None:
        self._layers = layers
        self._marks = marks
        #: Definitions built so far, by name, shared along a Location's snapshots.
        self._defined = {} if defined is None else defined
        self._definitions: tuple[ToolDefinition, ...] | None = None
        #: The sorted definitions of an earlier snapshot of the same boards,
        #: and the names changed since: ours are those, patched.
        self._basis: tuple[tuple[ToolDefinition, ...], set[str]] | None = None
        #: The JSON characters of all definitions, or an earlier snapshot's
        #: total with the tools and names to correct it by.
        self._characters: int | tuple[int, Mapping[str, Tool], set[str]] | None = None
        #: The search index over every definition, built at the first search.
        self._index: SearchIndex | None = None
        # One layer is the base, which holds no removed names: a plain dict.
        self.tools: Mapping[str, Tool] = (
            layers[0] if len(layers) == 1 else _Layered(layers, size)  # type: ignore[assignment]
        )

    @classmethod
    def of_tools(cls, tools: dict[str, Tool]) -> Snapshot:
        """A snapshot of exactly ``tools``, following no board."""
        return cls((dict(tools),), len(tools))

    @classmethod
    def of(cls, boards: Iterable[Board], previous: Snapshot | None = None) -> Snapshot:
        """Merge ``boards``; a later board's winners take precedence."""
        boards = tuple(boards)
        if previous is not None and previous._marks and len(previous._marks) == len(boards):
            changed: set[str] = set()
            marks = []
            for board, mark in zip(boards, previous._marks, strict=True):
                end, names = board.changes(mark)
                if names is None:
                    break
                changed.update(names)
                marks.append(end)
            else:
                return previous._changed(boards, changed, tuple(marks))
        # Positions first: a change landing while the winners are read shows up next time.
        marks = [board.changes(0)[0] for board in boards]
        merged: dict[str, Tool | None] = {}
        for board in boards:
            merged.update(board.winners())
        defined = None if previous is None else _prune(previous._defined, merged)
        return cls((merged,), len(merged), tuple(marks), defined)

    def _changed(
        self, boards: tuple[Board, ...], changed: set[str], marks: tuple[int, ...]
    ) -> Snapshot:
        """This snapshot with the effective tools of ``changed`` read again from ``boards``."""
        tools = self.tools
        size = len(tools)
        layer: dict[str, Tool | None] = {}
        for name in changed:
            tool = _effective(boards, name)
            size += (tool is not None) - (name in tools)
            layer[name] = tool
        layers = self._layers
        defined = self._defined
        # A layer at least half the size of the one below is merged into it, as
        # in a binary counter: each name is copied O(log n) times in all, so a
        # change costs O(log n) amortized and a lookup reads O(log n) layers.
        while len(layers) > 1 and 2 * len(layer) >= len(layers[-1]):
            below = dict(layers[-1])
            below.update(layer)
            layer = below
            layers = layers[:-1]
        if 2 * len(layer) >= len(layers[0]):
            base = dict(layers[0])
            base.update(layer)
            base = {name: tool for name, tool in base.items() if tool is not None}
            snapshot = Snapshot((base,), size, marks, _prune(defined, base))
        else:
            snapshot = Snapshot((*layers, layer), size, marks, defined)
        if isinstance(self._characters, int):
            snapshot._characters = (self._characters, self.tools, changed)
        if self._definitions is not None:
            snapshot._basis = (self._definitions, changed)
        elif self._basis is not None and len(self._basis[1]) + len(changed) <= size // 4 + 64:
            definitions, before = self._basis
            snapshot._basis = (definitions, before | changed)
        return snapshot

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The definitions of every name, sorted by name."""
        if self._definitions is None:
            if self._basis is None:
                self._definitions = tuple(self._define(name) for name in sorted(self.tools))
            else:
                self._patch(*self._basis)
                self._basis = None
        return self._definitions  # type: ignore[return-value]

    @property
    def characters(self) -> int:
        """The JSON characters of every definition, as ``defer="auto"`` counts them.

        After a few changes it corrects the previous snapshot's total by the
        changed names alone, so a request over many tools stays cheap to prepare.
        """
        known = self._characters
        if isinstance(known, int):
            return known
        tools = self.tools
        if known is None:
            total = sum(definition_characters(name, tool) for name, tool in tools.items())
        else:
            total, before, changed = known
            for name in changed:
                old, new = before.get(name), tools.get(name)
                if old is not None:
                    total -= definition_characters(name, old)
                if new is not None:
                    total += definition_characters(name, new)
        self._characters = total
        return total

    @property
    def index(self) -> SearchIndex:
        """The search index over every definition, built once, when first needed."""
        if self._index is None:
            from ._search import SearchIndex  # only a Location that searches pays for it

            self._index = SearchIndex(self.definitions)
        return self._index

    def _patch(self, definitions: tuple[ToolDefinition, ...], changed: set[str]) -> None:
        """Copy an earlier snapshot's sorted definitions, redoing only ``changed`` names."""
        tools = self.tools
        patched: list[ToolDefinition] = []
        start = 0
        for name in sorted(changed):
            index = bisect.bisect_left(definitions, name, start, key=_name)
            patched += definitions[start:index]
            found = index < len(definitions) and definitions[index].name == name
            start = index + 1 if found else index
            if name in tools:
                patched.append(self._define(name))
        patched += definitions[start:]
        self._definitions = tuple(patched)

    def define(self, name: str) -> ToolDefinition:
        """The definition of one captured name (it must be one)."""
        return self._define(name)

    def _define(self, name: str) -> ToolDefinition:
        tool = self.tools[name]
        known = self._defined.get(name)
        if known is None or known[0] is not tool:
            output = None if tool.output is None else tool.output.json_schema
            definition = ToolDefinition(
                name,
                tool.description,
                tool.input.json_schema,
                output,
                title=tool.title,
                annotations=tool.annotations,
                extra=tool.extra,
            )
            known = self._defined[name] = (tool, definition)
        return known[1]


def _name(definition: ToolDefinition) -> str:
    return definition.name


def _prune(
    defined: dict[str, tuple[Tool, ToolDefinition]], tools: Mapping[str, Tool | None]
) -> dict[str, tuple[Tool, ToolDefinition]]:
    """Forget the definitions of names that are gone (kept: the dict older snapshots share)."""
    # list() copies in one step: another thread may be adding definitions meanwhile.
    for name in [name for name in list(defined) if name not in tools]:
        defined.pop(name, None)
    return defined


def _effective(boards: tuple[Board, ...], name: str) -> Tool | None:
    for board in reversed(boards):
        tool = board.winner(name)
        if tool is not None:
            return tool
    return None


class Request:
    """One model request: the definitions to advertise and the tools they captured.

    Calls execute the registration captured when the request was prepared;
    registration changes affect only later requests. Deferred tools are
    captured too, and execute like the advertised ones.
    """

    __slots__ = (
        "_advertised",
        "_budget",
        "_defer",
        "_deferred",
        "_hooked",
        "_journal",
        "_loaded",
        "_pipeline",
        "_search_tool",
        "_snapshot",
        "_tools",
        "_withdrawn",
        "final_step",
    )

    def __init__(
        self,
        snapshot: Snapshot,
        pipeline: Pipeline,
        *,
        final_step: bool,
        definitions: tuple[ToolDefinition, ...] | None = None,
        defer: Literal["auto"] | frozenset[str] | None = None,
        loaded: frozenset[str] = frozenset(),
        budget: ToolBudget | None = None,
        journal: CallJournal | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._journal = journal
        self._snapshot = snapshot
        self._tools = snapshot.tools
        self.final_step = final_step
        #: What the prepare_request hooks kept, or None when none ran.
        self._hooked = definitions
        if definitions is None:
            self._withdrawn: frozenset[str] = frozenset()
        else:
            kept = {definition.name for definition in definitions}
            self._withdrawn = frozenset(name for name in snapshot.tools if name not in kept)
        self._defer = defer
        self._loaded = loaded
        self._budget = budget or ToolBudget()
        # Both worked out when first read: requests that only execute calls
        # never pay for them.
        self._advertised: tuple[ToolDefinition, ...] | None = None
        self._deferred: tuple[ToolDefinition, ...] | None = None
        self._search_tool: Tool | None = None

    def _every(self) -> tuple[ToolDefinition, ...]:
        """Every definition of the request, advertised or deferred, sorted by name."""
        return self._snapshot.definitions if self._hooked is None else self._hooked

    def _over_budget(self) -> bool:
        if self._hooked is None:
            characters = self._snapshot.characters
        else:
            tools = self._tools
            characters = sum(definition_characters(d.name, tools[d.name]) for d in self._hooked)
        return characters > self._budget.characters

    def _divide(self) -> tuple[ToolDefinition, ...]:
        defer = self._defer
        if defer is None:
            return self._every()
        loaded = self._loaded
        if defer == "auto":
            if not self._over_budget():
                return self._every()
            # Everything is deferred but the loaded tools: read them by name,
            # so a request over thousands of tools costs what it advertises.
            if not loaded:
                return (SEARCH_DEFINITION,) if len(self._tools) > len(self._withdrawn) else ()
            kept = sorted(
                name for name in loaded if name in self._tools and name not in self._withdrawn
            )
            advertised = tuple(self._snapshot.define(name) for name in kept)
            if len(advertised) == len(self._tools) - len(self._withdrawn):
                return advertised
            return (*advertised, SEARCH_DEFINITION)
        every = self._every()
        advertised = tuple(d for d in every if d.name not in defer or d.name in loaded)
        if len(advertised) == len(every):
            return advertised
        return (*advertised, SEARCH_DEFINITION)

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The inert definitions to send to the provider in full, in a stable order.

        When tools are deferred, the last is ``search_tools``, which finds them.
        """
        if self._advertised is None:
            self._advertised = self._divide()
        return self._advertised

    @property
    def deferred(self) -> tuple[ToolDefinition, ...]:
        """The definitions captured but not advertised in full, sorted by name.

        Calls to them execute like any other; `search` and the ``search_tools``
        tool find them.
        """
        if self._deferred is None:
            if not self._searching():
                self._deferred = ()
            else:
                only, exclude = self._scope()
                self._deferred = tuple(
                    d
                    for d in self._every()
                    if (d.name in only if only is not None else d.name not in exclude)
                )
        return self._deferred

    def _searching(self) -> bool:
        """Whether anything is deferred (then ``search_tools`` is advertised)."""
        definitions = self.definitions
        return bool(definitions) and definitions[-1] is SEARCH_DEFINITION

    def _scope(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        """``(only, exclude)``: the deferred names, or the captured names that are not."""
        if self._defer == "auto":
            return None, self._loaded | self._withdrawn
        defer = self._defer or frozenset()
        return defer - self._loaded - self._withdrawn, frozenset()

    def search(self, query: str, *, limit: int = 5) -> tuple[ToolDefinition, ...]:
        """The deferred definitions that best match ``query``, best first.

        Ranked with BM25 over each tool's name (split at ``_``, ``-`` and
        camelCase), description, parameter names and parameter descriptions;
        the same snapshot always gives the same ranking. At most ``limit``
        (a positive integer) are returned; none when nothing is deferred or no
        word of the query occurs in any of them. The index is built at the
        first search and shared by the requests of the same snapshot.
        """
        if not isinstance(query, str):
            raise TypeError(f"search() takes the query as a string, got {type(query).__name__}")
        if not query.strip():
            raise ValueError("search() needs a query: describe what the tool should do")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"search() takes a positive integer limit, got {limit!r}")
        if not self._searching():
            return ()
        return self._search(query, limit)

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
        outcome could not be retained whole. When the request was prepared
        with a journal, a call it holds settled returns the stored outcome
        without running (see docs/host-guide.md, "Durable calls").
        """
        if not isinstance(call, ToolCall) or not isinstance(call.context, ToolContext):
            raise TypeError("execute() takes a pegboard.ToolCall with a pegboard.ToolContext")
        found = instruments()
        settle = self._execute if self._journal is None else self._journaled
        if found is None:
            return await settle(call)
        secrets = self._pipeline.secrets
        return await traced(
            found,
            settle,
            call,
            redact=None if secrets is None else secrets.redact,
            trace_content=self._pipeline.trace_content,
        )

    async def _journaled(self, call: ToolCall) -> Outcome:
        """``call`` through the request's journal: settled once, replayed after."""
        from ._journal import journaled

        assert self._journal is not None
        return await journaled(self._journal, call, self._execute)

    def _execute(self, call: ToolCall) -> Awaitable[Outcome]:
        """The settling of ``call``, to await: a plain function, so that the untraced
        path adds no coroutine frame."""
        identity = CallIdentity.of(call.context)
        name = call.name
        tool = self._tools.get(name)
        if tool is None and name == SEARCH_TOOLS and self._searching():
            if self._search_tool is None:
                self._search_tool = search_tool(self._search)
            tool = self._search_tool
        if self.final_step:
            return self._pipeline.fail(
                identity,
                name,
                "final_step",
                f"tool {name!r} was not run: this is the final step, which allows no tool "
                "calls; answer with what you have",
            )
        if tool is None or name in self._withdrawn:
            if name in self._withdrawn:
                return self._pipeline.fail(
                    identity,
                    name,
                    "unavailable",
                    f"tool {name!r} is not available for this request; use another tool",
                )
            known = ", ".join(definition.name for definition in self.definitions[:20])
            return self._pipeline.fail(
                identity,
                name,
                "unknown_tool",
                f"there is no tool named {name!r}; available tools: {known or '(none)'}",
            )
        return self._pipeline.run(name, tool, call, identity)

    async def settle(self, call: ToolCall) -> Outcome:
        """`execute`, with a permission the user rejected settled as the call's `Failed`.

        Its error is of kind ``rejected``, with the rejected action and resources
        as metadata so that a host can stop its run or name a rule that allows it.
        """
        try:
            return await self.execute(call)
        except PermissionRejected as rejected:
            asked = rejected.request
            metadata = (
                None
                if asked is None
                else {"action": asked.action, "resources": list(asked.resources)}
            )
            return await self._pipeline.fail(
                CallIdentity.of(call.context), call.name, "rejected", str(rejected),
                metadata=metadata,
            )  # fmt: skip

    async def execute_step(
        self,
        calls: Iterable[tuple[str, str, object]],
        *,
        session_id: str,
        agent: str,
        message_id: str,
        timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
        on_event: Callable[[StepEvent], object] | None = None,
    ) -> list[tuple[ToolCall, Outcome | str]]:
        """Run one step's calls, given as (call ID, tool name, raw input), concurrently;
        every call gets an answer, in call order.

        Each answer is the call's outcome (through `settle`: a rejected permission
        is a ``rejected`` failure), or, for a call that has none, why in words for
        the model: it ran past ``timeout`` seconds and was cancelled, or its tool
        raised (a ``"defect"`` event carries the exception). ``on_event`` hears
        each call's events (`pegboard.StepEvent`). Cancelling this cancels every call
        and propagates. The providers' ``run_step`` is this plus the wire format.
        """
        from ._step import run_calls

        return await run_calls(
            self,
            list(calls),
            session_id=session_id,
            agent=agent,
            message_id=message_id,
            timeout=timeout,
            on_event=on_event,
        )

    def _search(self, query: str, limit: int) -> tuple[ToolDefinition, ...]:
        only, exclude = self._scope()
        return self._snapshot.index.search(query, limit, only=only, exclude=exclude)

    async def execute_all(self, calls: Iterable[ToolCall]) -> list[Outcome]:
        """Run one step's calls concurrently and return their outcomes in call order.

        Each call goes through `execute`, all in one anyio task group, so a call
        that is rejected or fails still leaves the others to finish. A permission
        the user rejected without feedback (`pegboard.PermissionRejected`) is that
        call's `Failed` outcome, of kind ``rejected``, never an exception. A defect
        is different: when a call raises (its tool raised an unexpected
        exception, or `pegboard.RetentionError`), the calls still running are
        cancelled, no outcome is returned, and the exception propagates
        unchanged; if several calls raised at once, they propagate together as
        an ``ExceptionGroup``. Cancelling the caller cancels every call and
        propagates as cancellation. A runner that must answer every
        call whatever happens uses a provider's ``run_step`` (see docs/providers.md).
        """
        batch = list(calls)
        for call in batch:
            if not isinstance(call, ToolCall) or not isinstance(call.context, ToolContext):
                raise TypeError(
                    "execute_all() takes pegboard.ToolCall values with a pegboard.ToolContext"
                )
        if len(batch) <= 1:
            return [await self.settle(call) for call in batch]
        outcomes: list[Outcome | None] = [None] * len(batch)
        defects: list[Exception] = []

        async def run(index: int, call: ToolCall, scope: anyio.CancelScope) -> None:
            try:
                outcomes[index] = await self.settle(call)
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
