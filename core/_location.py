"""Locations: an open workspace, its board and its request snapshots."""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.from_thread
import attrs

from ._activation import Activation
from ._bounding import OutputLimits
from ._deferral import ToolBudget
from ._filesystem import Filesystem
from ._permissions import Permissions
from ._pipeline import Pipeline
from ._plugins import PluginError, PluginInfo, Plugins
from ._registry import Board, Scope, Tools
from ._request import Request, Snapshot
from ._storage import ManagedStorage
from .sandbox import SandboxInfo

if TYPE_CHECKING:
    from ._journal import CallJournal
    from .codemode import CodeModeLimits

__all__ = ("Location", "ToolChanges")


class ToolChanges:
    """Changes to a Location's tools, as ``location.watch()`` returns them: an
    async iterator that yields once per wake-up, and an async context manager.
    """

    __slots__ = ("__weakref__", "_closed", "_event", "_stops", "_thread")

    def __init__(self, boards: Iterable[Board]) -> None:
        self._event = anyio.Event()
        self._closed = False
        self._thread = threading.get_ident()
        self._stops = [board.subscribe(self._wake) for board in boards]

    def _wake(self) -> None:
        if threading.get_ident() == self._thread:
            self._event.set()
        else:  # a registration made from a worker thread
            anyio.from_thread.run_sync(self._event.set)

    def close(self) -> None:
        """Stop following changes; a waiting consumer's iteration ends."""
        self._closed = True
        for stop in self._stops:
            stop()
        self._stops.clear()
        self._event.set()

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> ToolChanges:
        return self

    async def __anext__(self) -> None:
        if not self._closed:
            await self._event.wait()
        if self._closed:
            raise StopAsyncIteration
        self._event = anyio.Event()

    async def __aenter__(self) -> ToolChanges:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Location:
    """An open workspace (usually a project directory) with its own tool board.

    Tools registered on ``location.tools`` take precedence over the host's
    application tools. Open one with ``host.location(root)``.
    """

    def __init__(
        self,
        root: Path,
        application: Board,
        pipeline: Pipeline,
        *,
        filesystem: Filesystem,
        permissions: Permissions,
        enabled: tuple[str, ...] = (),
        code_mode: CodeModeLimits | None = None,
        sandbox: SandboxInfo | None = None,
        tool_budget: ToolBudget | None = None,
    ) -> None:
        self.root = root
        #: Which OS sandbox confines the commands tools start here, or why none does.
        self.sandbox = sandbox or SandboxInfo(kind=None, reason="no sandbox was set up")
        #: The filesystem service, confined to ``root``.
        self.filesystem = filesystem
        #: The permission service: the host's rules, approver and saved approvals.
        self.permissions = permissions
        #: The plugins enabled here, in order, whether or not they activated.
        self.enabled = enabled
        self._board = Board()
        self._scope = Scope("location")
        #: Registers tools on this Location's board for as long as it is open.
        self.tools = Tools(self._board, self._scope)
        self._boards = (application, self._board)
        self._pipeline = pipeline
        self._snapshot: tuple[tuple[int, ...], Snapshot] | None = None
        self._activation: Activation | None = None
        self._plugins: Plugins | None = None
        self._closed = False
        self._watchers: weakref.WeakSet[ToolChanges] = weakref.WeakSet()
        self._code_mode = code_mode
        #: How much of a request's tools ``prepare(defer="auto")`` advertises in full.
        self.tool_budget = tool_budget or ToolBudget()

    @property
    def limits(self) -> OutputLimits:
        return self._pipeline.limits

    @property
    def storage(self) -> ManagedStorage:
        """This Location's own area of managed storage (``storage.directory``).

        It holds the files oversized results name; only this Location (and a
        later one at the same root) can read them.
        """
        return self._pipeline.storage

    def redact(self, text: str) -> str:
        """``text`` with the host's secrets (``host.location(secrets=...)``) redacted.

        For what a host shows besides outcomes, which are redacted already: an
        exception's message, say.
        """
        secrets = self._pipeline.secrets
        return text if secrets is None else secrets.redact(text)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def plugin_errors(self) -> tuple[PluginError, ...]:
        """The plugins that failed here, each naming its plugin and phase."""
        return () if self._activation is None else tuple(self._activation.errors)

    @property
    def plugins(self) -> tuple[str, ...]:
        """The names of the plugins active here, in activation order."""
        if self._activation is None:
            return ()
        return tuple(plugin.name for plugin in self._activation.active)

    @property
    def plugin_info(self) -> tuple[PluginInfo, ...]:
        """Each plugin enabled here, in order, with ``confined`` saying how it ran:
        in a sandboxed worker of its own (True) or in the host's process (False)."""
        if self._activation is None or self._plugins is None:
            return ()
        return tuple(
            self._plugins.info_of(name, confined=confined)
            for name, confined in self._activation.confined.items()
        )

    def prepare(
        self,
        *,
        final_step: bool = False,
        code_mode: bool | CodeModeLimits = False,
        defer: Literal["auto"] | Iterable[str] | None = None,
        loaded: Iterable[str] = (),
        journal: CallJournal | None = None,
    ) -> Request:
        """Capture, for every advertised name, the effective registration now.

        On the final step the definitions stay and ``tool_choice`` is ``"none"``.
        ``defer`` names tools to capture without advertising them in full (an
        unknown name raises `ValueError`), or is ``"auto"``: defer every tool
        once their definitions exceed the Location's `pegboard.ToolBudget`.
        ``loaded`` names tools already revealed to the model: they are always
        advertised (names no longer registered are ignored). A request with
        deferred tools also advertises ``search_tools``, which finds them; a
        deferred tool executes like any other. See docs/host-guide.md, "Many tools".
        With ``code_mode`` the request advertises one tool, ``execute``, running a
        sandboxed program over the captured tools; see docs/code-mode.md. ``True``
        takes the limits the Location was opened with (``host.location(...,
        code_mode=...)``, else the defaults); a `pegboard.codemode.CodeModeLimits`
        sets this request's own.
        With a ``journal`` (a `pegboard.CallJournal`, such as
        `pegboard.SQLiteJournal`), every call of the request goes through it:
        a call already settled returns its stored outcome without running; see
        docs/host-guide.md, "Durable calls". With Code Mode it journals the
        ``execute`` call.
        """
        if self._closed:
            raise RuntimeError(f"the Location at {self.root} is closed; open a new one")
        if journal is not None:
            from ._journal import check_journal

            check_journal(journal, "prepare")
        versions = tuple(board.version for board in self._boards)
        if self._snapshot is None or self._snapshot[0] != versions:
            # Rebuilt only when a board changed; otherwise requests share it.
            previous = None if self._snapshot is None else self._snapshot[1]
            self._snapshot = (versions, Snapshot.of(self._boards, previous))
        snapshot = self._snapshot[1]
        definitions = None
        if self._activation is not None and self._activation.prepare_hooks():
            definitions = self._activation.withdraw(snapshot.definitions, final_step)
        request = Request(
            snapshot,
            self._pipeline,
            final_step=final_step,
            definitions=definitions,
            defer=_deferral(defer, snapshot),
            loaded=_names(loaded, "loaded"),
            budget=self.tool_budget,
            journal=None if code_mode is not False else journal,
        )
        if code_mode is False:
            return request
        # Imported by name: only Code Mode pays for it, and the engine does not
        # depend on the subpackage built on top of it.
        codemode = importlib.import_module("pegboard.codemode")
        opened_with = self._code_mode or codemode.CodeModeLimits()
        limits = opened_with if code_mode is True else code_mode
        if not isinstance(limits, codemode.CodeModeLimits):
            raise TypeError(
                f"code_mode takes True or a pegboard.codemode.CodeModeLimits, got {code_mode!r}"
            )
        program = codemode.execute_tool(request, limits)
        outer = Snapshot.of_tools({"execute": program})
        return Request(outer, self._pipeline, final_step=final_step, journal=journal)

    def watch(self) -> ToolChanges:
        """Follow changes to the tools registered here or on the host's application board.

        The result is an async iterator that yields after each change, from the
        moment ``watch`` returns, and ends when the Location closes. Changes
        that land while the consumer is busy wake it once, so read
        ``prepare().definitions`` again on each wake-up rather than counting.
        Use it as an async context manager (or call ``aclose()``) to stop early.
        """
        changes = ToolChanges(self._boards)
        if self._closed:
            changes.close()
        else:
            self._watchers.add(changes)
        return changes

    def _attach(self, activation: Activation, plugins: Plugins | None = None) -> None:
        self._activation = activation
        self._plugins = plugins
        self._pipeline = attrs.evolve(self._pipeline, after_hooks=activation.after_hooks())

    def _close(self) -> None:
        self._closed = True
        self._scope.close()
        for changes in tuple(self._watchers):
            changes.close()

    def __repr__(self) -> str:
        return f"<Location {str(self.root)!r}{' (closed)' if self._closed else ''}>"


_NONE: frozenset[str] = frozenset()


def _names(names: Iterable[str], argument: str) -> frozenset[str]:
    if names == ():
        return _NONE
    if isinstance(names, str):
        raise TypeError(f"{argument}= takes an iterable of tool names, got the string {names!r}")
    found = frozenset(names)
    if not all(isinstance(name, str) for name in found):
        raise TypeError(f"{argument}= takes an iterable of tool names, got {names!r}")
    return found


def _deferral(
    defer: Literal["auto"] | Iterable[str] | None, snapshot: Snapshot
) -> Literal["auto"] | frozenset[str] | None:
    """``defer=`` checked: ``None``, ``"auto"``, or names the snapshot has."""
    if defer is None or defer == "auto":
        return defer
    if isinstance(defer, str):
        raise ValueError(
            f"defer= takes None, 'auto' or an iterable of tool names, got the string {defer!r}"
        )
    names = _names(defer, "defer")
    unknown = sorted(name for name in names if name not in snapshot.tools)
    if unknown:
        raise ValueError(
            f"defer= names tools this Location does not have: {', '.join(map(repr, unknown))}; "
            "defer only registered tools (request.definitions lists them)"
        )
    return names
