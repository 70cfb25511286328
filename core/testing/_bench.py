"""The checks' workbench: a host, fresh seeded Locations, and calls seen from inside."""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import attrs

import pegboard
from pegboard import _confining, hookimpl
from pegboard._confined import ConfineMode, Worker

from .._plugins import BUILTIN_MODULES
from ._report import NotJudged
from ._subject import Installed, Subject, seed_files
from ._watchdog import WARM_UP, Watchdog, following

__all__ = ("Bench", "CallResult", "CallTimeout", "Opened", "describe_error", "describe_outcome")

#: The kit's own plugin, enabled before the plugin under test, so its
#: ``execute_after`` hook sees each call's outcome before the plugin's hooks can
#: replace it. That keeps a broken hook from being blamed on the tool.
_OBSERVER = "pegboard-check-observer"
_ALLOW_ALL = ({"action": "*", "resource": "*", "effect": "allow"},)
_SETUP_PHASES = ("import", "options", "activation")


class CallTimeout(TimeoutError):  # noqa: N818 - reads as what happened
    """A call did not settle within the subject's timeout."""


class _Observer:
    def __init__(self) -> None:
        self.seen: dict[str, pegboard.Outcome] = {}

    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> None:
        self.seen[event.call.call_id] = event.outcome


@contextlib.contextmanager
def pegboard_warnings(keep: Callable[[str], bool]) -> Iterator[list[str]]:
    """Collect the messages of pegboard's warnings that ``keep`` accepts, while open."""
    found: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if keep(message):
                found.append(message)

    logger = logging.getLogger("pegboard")
    handler = Handler(logging.WARNING)
    level = logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.WARNING):
        logger.setLevel(logging.WARNING)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _dropped_metadata(message: str) -> bool:
    return message.startswith("dropped metadata")


async def _approve_once(request: pegboard.PermissionRequest) -> Literal["once"]:
    return "once"


async def _never_answer(request: pegboard.PermissionRequest) -> Literal["once"]:
    await anyio.sleep_forever()
    return "once"  # never reached: the call is cancelled while it waits here


async def _ignore(progress: pegboard.Progress) -> None:
    return None


@attrs.frozen
class CallResult:
    """One call as the kit saw it.

    ``own`` is the outcome the call settled into before any hook of the plugin
    under test ran (``None`` if it never settled), ``final`` what
    ``request.execute`` returned and ``error`` what it raised instead;
    ``dropped`` holds pegboard's warnings about metadata dropped from the call.
    """

    tool: str
    input: object
    own: pegboard.Outcome | None
    final: pegboard.Outcome | None
    error: Exception | None
    dropped: tuple[str, ...] = ()

    @property
    def tool_error(self) -> Exception | None:
        """What the call raised before it settled: the tool's (or its codec's) doing."""
        return self.error if self.own is None else None

    @property
    def hook_error(self) -> Exception | None:
        """What the call raised after it settled: an ``execute_after`` hook's doing."""
        return self.error if self.own is not None else None


@attrs.frozen
class Opened:
    """An open Location and its root folder."""

    location: pegboard.Location
    root: Path

    def definitions(self) -> dict[str, pegboard.ToolDefinition]:
        """What a request prepared now advertises, by name."""
        return {definition.name: definition for definition in self.location.prepare().definitions}

    def tools(self) -> dict[str, pegboard.ToolDefinition]:
        """`definitions`, or `NotJudged` when there are none to judge."""
        found = self.definitions()
        if not found:
            raise NotJudged("the plugin registered no tools; see activation")
        return found


class Bench:
    """One host with the plugin under test installed, and a folder for Locations.

    Every Location it opens gets a fresh root seeded with the subject's files,
    the same managed storage, and permissions that allow everything (or, with
    ``blocking=True``, no rules and an approver that never answers, so a tool
    that asks is left waiting).
    """

    def __init__(self, subject: Subject, directory: Path) -> None:
        self.subject = subject
        self.directory = directory
        self.storage = directory / "storage"
        self.host = pegboard.Host(strict=False, activation_timeout=subject.timeout)
        self._observer = _Observer()
        self.host.add_plugin(_OBSERVER, self._observer)
        installed = subject.install(self.host)
        self.name = installed.name
        self.confine, self.where = _placement(subject, installed)
        #: The watchdog over the whole run, while the blocking check is among the checks.
        self.dog: Watchdog | None = None
        self._warm: set[str] = set()
        self._calls = itertools.count(1)
        self._session = str(uuid.uuid4())

    async def seed(self) -> Path:
        """A fresh root folder holding the subject's files.

        Named as any temporary folder is (``tmpXXXXXXXX`` in the system's temporary
        directory), as a host's might be: nothing in the path a plugin sees says
        that the kit runs it.
        """
        root = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp))
        try:
            await anyio.to_thread.run_sync(seed_files, root, self.subject.files)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return root

    @contextlib.asynccontextmanager
    async def open(
        self, label: str, *, require_active: bool = True, blocking: bool = False
    ) -> AsyncIterator[Opened]:
        """Open a fresh Location with the observer and the plugin under test enabled.

        With ``require_active`` (the default) a plugin that did not activate
        makes the calling check `NotJudged`: the activation check reports it.
        """
        root = await self.seed()
        # A closed Location's folder goes with it, so a plugin that keeps using one
        # (a module global holding the first root it saw) fails visibly afterwards.
        cleanup = contextlib.AsyncExitStack()
        cleanup.push_async_callback(
            anyio.to_thread.run_sync, functools.partial(shutil.rmtree, root, ignore_errors=True)
        )
        dog = self.dog
        label = f"activating plugin {self.name!r} (activate_location)"
        if "open" not in self._warm:
            self._warm.add("open")
            label = f"{WARM_UP}the first Location (importing the plugin)"
        async with contextlib.AsyncExitStack() as opening:
            await opening.enter_async_context(cleanup)  # the folder goes after the Location
            teardown = _Span(dog, f"closing the Location (plugin {self.name!r}'s teardown)")
            opening.callback(teardown.end)
            with dog.activity(label) if dog is not None else contextlib.nullcontext():
                location = await opening.enter_async_context(self._location(root, blocking))
            opening.callback(teardown.begin)
            if dog is not None:
                await opening.enter_async_context(following(dog, self.worker(location)))
            if require_active:
                problem = self.setup_error(location)
                if problem is not None:
                    raise NotJudged(f"the plugin did not activate ({problem}); see activation")
            yield Opened(location, root)

    def _location(
        self, root: Path, blocking: bool
    ) -> contextlib.AbstractAsyncContextManager[pegboard.Location]:
        spec = {"name": self.name, "options": dict(self.subject.options)}
        return self.host.location(
            root,
            plugins=[_OBSERVER, spec],
            trusted=[_OBSERVER, self.name] if self.subject.trusted else [_OBSERVER],
            confine=self.confine,
            network=[self.name] if self.subject.network else [],
            storage=self.storage,
            permissions=() if blocking else _ALLOW_ALL,
            approver=_never_answer if blocking else _approve_once,
        )

    @property
    def confined(self) -> bool:
        """Whether the plugin under test runs in a sandboxed worker of its own."""
        return self.where.startswith("confined")

    def worker(self, location: pegboard.Location) -> Worker | None:
        """The worker process the plugin under test runs in, in ``location``."""
        activation = location._activation
        for plugin in () if activation is None else activation.active:
            if plugin.name == self.name:
                return plugin.worker
        return None

    def setup_error(self, location: pegboard.Location) -> str | None:
        """Why the plugin is not active in ``location``, or ``None`` if it is."""
        for error in location.plugin_errors:
            if error.plugin == self.name and error.phase in _SETUP_PHASES:
                return f"{error.phase}: {error.message}"
        if self.name not in location.plugins:
            return "it is not among the Location's active plugins"
        return None

    def context(
        self, progress: Callable[[pegboard.Progress], Awaitable[None]] | None = None
    ) -> pegboard.ToolContext:
        """A runner context with a call ID no other call of this bench has."""
        serial = next(self._calls)
        # IDs of the shape a host's runner gives, so a plugin cannot tell the checks by them.
        return pegboard.ToolContext(
            session_id=self._session,
            agent="main",
            message_id=f"message-{serial}",
            call_id=f"call-{serial}",
            progress=progress or _ignore,
        )

    async def call(
        self,
        opened: Opened,
        tool: str,
        input: Mapping[str, Any] | str,
        *,
        request: pegboard.Request | None = None,
    ) -> CallResult:
        """Execute one call; whatever happens is returned, never raised."""
        context = self.context()
        request = opened.location.prepare() if request is None else request
        final: pegboard.Outcome | None = None
        error: Exception | None = None
        dropping = pegboard_warnings(_dropped_metadata)
        label = f"a call of tool {tool!r} (its execute, or a hook)"
        if tool not in self._warm:  # its first call may import what it needs, once
            self._warm.add(tool)
            label = f"{WARM_UP}the first call of tool {tool!r}"
        watched = self.dog.activity(label) if self.dog is not None else contextlib.nullcontext()
        with (
            watched,
            dropping as dropped,
            anyio.move_on_after(self.subject.timeout) as waited,
        ):
            try:
                final = await request.execute(pegboard.ToolCall(tool, input, context))
            except Exception as caught:  # noqa: BLE001 - what a call raises is a finding
                error = caught
        if waited.cancelled_caught:
            error = CallTimeout(f"the call did not settle within {self.subject.timeout:g} s")
        own = self._observer.seen.pop(context.call_id, None)
        return CallResult(tool, input, own, final, error, tuple(dropped))

    def forget(self, call_id: str) -> pegboard.Outcome | None:
        """The observed outcome of ``call_id``, removed from the record."""
        return self._observer.seen.pop(call_id, None)


def _placement(subject: Subject, installed: Installed) -> tuple[ConfineMode, str]:
    """The ``confine`` choice the Locations get, and where the plugin runs, in words."""
    if installed.name in BUILTIN_MODULES:
        return "off", "in the checks' process, as every host runs a built-in plugin"
    if subject.trusted:
        return "off", "in the checks' process, as hosts run a plugin they trust"
    if subject.confine == "off":
        return "off", "in the checks' process (confine off), as a host with confine='off' runs it"
    missing = _confining.confinement_missing()
    if missing is not None and subject.confine == "required":
        return "required", f"nowhere: it must run confined, and {missing}"
    if missing is not None:
        return "off", (
            f"in the checks' process, since no sandbox can confine it here ({missing}); "
            "hosts where one can run it confined"
        )
    if installed.unnamed is not None:
        return subject.confine, f"in the checks' process: {installed.unnamed}"
    return subject.confine, "confined, in a sandboxed worker of its own, as hosts run it"


class _Span:
    """An activity of the watchdog's whose start and end are two separate steps."""

    def __init__(self, dog: Watchdog | None, label: str) -> None:
        self._dog = dog
        self._label = label
        self._entered: contextlib.ExitStack | None = None

    def begin(self) -> None:
        if self._dog is not None:
            self._entered = contextlib.ExitStack()
            self._entered.enter_context(self._dog.activity(self._label))

    def end(self) -> None:
        if self._entered is not None:
            self._entered.close()


def describe_outcome(outcome: pegboard.Outcome) -> str:
    """``completed`` or ``failed (kind): message``, for messages."""
    if isinstance(outcome, pegboard.Completed):
        return "completed"
    return f"failed ({outcome.error.kind}): {outcome.error.message}"


def describe_error(error: BaseException) -> str:
    """An exception as ``Type: message``."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
