"""Boards, scopes and registrations: who hangs which tool under which name."""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType, TracebackType

from ._errors import RegistrationError
from ._tool import Tool

__all__ = ("Board", "Registration", "Scope", "Tools", "effective_name")

_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")
_VALID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
#: Effective names no registration may take: Code Mode's entry point.
#: Names the framework advertises itself, and what for.
RESERVED = {"execute": "Code Mode", "search_tools": "tool search"}

# What a Tools capability or a Registration acts on, kept out of the objects
# plugins hold: their attributes reach no board (which would hold every tool
# of the Location) and no scope. Weak both ways, so a board that holds a
# Registration never keeps its own entry alive.
_BOARDS: weakref.WeakKeyDictionary[object, tuple[weakref.ref[Board], weakref.ref[Scope], str]] = (
    weakref.WeakKeyDictionary()
)


def _bind(capability: object, board: Board, scope: Scope) -> None:
    _BOARDS[capability] = (weakref.ref(board), weakref.ref(scope), scope.name)


def _bound(capability: object) -> tuple[Board | None, Scope | None]:
    """The board and scope ``capability`` acts on; ``None`` for what no longer exists."""
    try:
        board, scope, _ = _BOARDS[capability]
    except KeyError:
        raise RuntimeError(
            f"this {type(capability).__name__} is a copy, not bound to a board; "
            "use the one pegboard gave you"
        ) from None
    return board(), scope()


def _closed(tools: object) -> RegistrationError:
    return RegistrationError(
        f"scope {_scope_name(tools)!r} is closed; it can register no more tools"
    )


def _scope_name(capability: object) -> str:
    binding = _BOARDS.get(capability)
    return "unbound" if binding is None else binding[2]


def effective_name(name: str, namespace: str | None = None) -> str:
    """Normalize an authored name (and namespace) into the model-facing name.

    Every character outside ``[A-Za-z0-9_-]`` becomes ``_``; a namespace gives
    ``<namespace>_<name>``. Raises `RegistrationError` unless the result matches
    ``^[A-Za-z][A-Za-z0-9_-]{0,63}$`` and is not reserved.
    """
    if not isinstance(name, str) or not name:
        raise RegistrationError(f"tool names are non-empty strings, got {name!r}")
    normal = _OUTSIDE.sub("_", name)
    if namespace is not None:
        if not isinstance(namespace, str) or not namespace:
            raise RegistrationError(f"a namespace is a non-empty string, got {namespace!r}")
        normal = f"{_OUTSIDE.sub('_', namespace)}_{normal}"
    if not _VALID.match(normal):
        reason = (
            f"is {len(normal)} characters long; the limit is 64"
            if len(normal) > 64
            else "must start with a letter"
        )
        raise RegistrationError(
            f"tool name {name!r} becomes {normal!r}, which {reason}; rename the tool"
        )
    if normal in RESERVED:
        raise RegistrationError(
            f"tool name {name!r} becomes {normal!r}, which is reserved for {RESERVED[normal]}; "
            "rename the tool"
        )
    return normal


class Board:
    """One placement's registrations: the latest active one of each name wins.

    ``version`` changes whenever the winners may have changed, so readers can
    reuse what they derived from the board until then; ``subscribe`` tells
    listeners when that happens.
    """

    def __init__(self) -> None:
        self._stacks: dict[str, list[tuple[Registration, Tool]]] = {}
        #: Per name, how many closed entries still sit below the top of its stack.
        self._buried: dict[str, int] = {}
        # The names each change touched, so a reader can update what it derived
        # from the board by the names alone; the oldest half goes when the log
        # outgrows the board, and a reader that far behind starts afresh.
        self._log: list[str] = []
        self._log_start = 0
        self._listeners: dict[object, Callable[[], None]] = {}
        # A sync activation hook registers from a worker thread, one that
        # outlived its timeout even while the Location goes on.
        self._lock = threading.Lock()
        self.version = 0

    def winners(self) -> dict[str, Tool]:
        """The effective tool for every name that has an active registration."""
        with self._lock:
            return {name: stack[-1][1] for name, stack in self._stacks.items()}

    def winner(self, name: str) -> Tool | None:
        """The effective tool of ``name`` here, or ``None``."""
        with self._lock:
            stack = self._stacks.get(name)
            return None if stack is None else stack[-1][1]

    def changes(self, since: int) -> tuple[int, list[str] | None]:
        """The log position now, and the names changed since position ``since``.

        The names are ``None`` when the log no longer reaches back that far.
        """
        with self._lock:
            end = self._log_start + len(self._log)
            if since < self._log_start:
                return end, None
            return end, self._log[since - self._log_start :]

    def _logged(self, names: Iterable[str]) -> None:
        log = self._log
        log.extend(names)
        if len(log) > 1024 and len(log) > 2 * len(self._stacks):
            drop = len(log) // 2
            del log[:drop]
            self._log_start += drop

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every change; return the function that stops it.

        Listeners run synchronously inside ``register`` and ``close``, so they
        must be quick and must not raise.
        """
        token = object()  # the same callable may subscribe twice
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def _notify(self) -> None:
        # Outside every lock: a listener may wait for the event loop.
        for listener in tuple(self._listeners.values()):
            listener()

    def _add(self, registration: Registration, tools: Mapping[str, Tool]) -> None:
        with self._lock:
            for name, tool in tools.items():
                self._stacks.setdefault(name, []).append((registration, tool))
            self._logged(tools)
            self.version += 1

    def _remove(self, registration: Registration) -> None:
        # ``registration`` is already closed. Closed entries leave the top of a
        # stack at once (the winner is always active); below the top they are
        # swept when they make up half the stack. Each entry is visited O(1)
        # times: closing n registrations of one name costs O(n), in any order.
        with self._lock:
            for name in registration.names.values():
                stack = self._stacks.get(name)
                if stack is None:
                    continue
                if stack[-1][0] is registration:
                    stack.pop()
                    while stack and stack[-1][0]._closed:
                        stack.pop()
                        self._buried[name] -= 1
                else:
                    self._buried[name] = buried = self._buried.get(name, 0) + 1
                    if buried * 2 > len(stack):
                        stack[:] = [entry for entry in stack if not entry[0]._closed]
                        buried = 0
                    self._buried[name] = buried
                if not stack:
                    del self._stacks[name]
                if not self._buried.get(name, 1):
                    del self._buried[name]
            self._logged(registration.names.values())
            self.version += 1


class Scope:
    """Owns registrations; closing it closes every one it made, latest first."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._registrations: dict[Registration, None] = {}
        self._closed = False
        # Makes "still open? then add" in register one step against close.
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close every registration this scope made; idempotent."""
        with self._lock:
            self._closed = True
            registrations = list(self._registrations)
        for registration in reversed(registrations):
            registration.close()

    def _adopt(self, registration: Registration) -> None:
        self._registrations[registration] = None

    def _forget(self, registration: Registration) -> None:
        self._registrations.pop(registration, None)


class Registration:
    """One accepted ``register`` call. ``names`` maps authored to effective names.

    ``close()`` removes exactly these registrations and is idempotent; a
    Registration is also a context manager that closes on exit.
    """

    __slots__ = ("__weakref__", "_closed", "names")

    def __init__(self, board: Board, scope: Scope, names: Mapping[str, str]) -> None:
        _bind(self, board, scope)
        self._closed = False
        self.names: Mapping[str, str] = MappingProxyType(dict(names))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        board, scope = _bound(self)
        self._closed = True
        if scope is not None:
            scope._forget(self)
        if board is not None:
            board._remove(self)
            board._notify()

    def __enter__(self) -> Registration:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "active"
        return f"<Registration {dict(self.names)!r} in {_scope_name(self)!r} ({state})>"


class Tools:
    """The narrow capability to register tools on one board, in one scope.

    It offers ``register`` and nothing else: the board and scope it acts on
    are not among its attributes, nor among a `Registration`'s.
    """

    __slots__ = ("__weakref__",)

    def __init__(self, board: Board, scope: Scope) -> None:
        _bind(self, board, scope)

    def register(self, tools: Mapping[str, Tool], *, namespace: str | None = None) -> Registration:
        """Register ``tools`` under their authored names (the mapping's keys).

        All or nothing: a bad or reserved name, a value that is not a `Tool`,
        or two names that normalize to one raise `RegistrationError` and
        register nothing. Later changes to ``tools`` change nothing here.
        """
        board, scope = _bound(self)
        if board is None or scope is None or scope.closed:
            raise _closed(self)
        if not isinstance(tools, Mapping):
            raise RegistrationError(
                f"register() takes a mapping of names to tools, got {type(tools).__name__}"
            )
        snapshot = dict(tools)
        names: dict[str, str] = {}
        by_effective: dict[str, Tool] = {}
        for authored, value in snapshot.items():
            if not isinstance(value, Tool):
                raise RegistrationError(
                    f"{authored!r} maps to a {type(value).__name__}, not a Tool; "
                    "make it with pegboard.tool(...)"
                )
            effective = effective_name(authored, namespace)
            if effective in by_effective:
                other = next(key for key, name in names.items() if name == effective)
                raise RegistrationError(
                    f"tool names {other!r} and {authored!r} both become {effective!r}; "
                    "rename one of them"
                )
            names[authored] = effective
            by_effective[effective] = value
        registration = Registration(board, scope, names)
        with scope._lock:
            if scope.closed:  # closed meanwhile, by the event loop
                raise _closed(self)
            board._add(registration, by_effective)
            scope._adopt(registration)
        board._notify()
        return registration

    def __repr__(self) -> str:
        return f"<Tools for scope {_scope_name(self)!r}>"
