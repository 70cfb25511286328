"""The sandbox: one pydantic-monty session per program, stepped from worker threads."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ._limits import CodeModeLimits

__all__ = ("Session", "require")

T = TypeVar("T")

_INSTALL = "pip install 'pegboard[codemode]'"
_POOL: Any = None
_POOL_LOCK = threading.Lock()


def require() -> ModuleType:
    """Import pydantic-monty, or say how to install it."""
    try:
        import pydantic_monty
    except ImportError as error:
        raise ImportError(
            f"Code Mode runs programs in pydantic-monty, which is not installed; "
            f"install it with {_INSTALL}"
        ) from error
    return pydantic_monty


def _pool() -> Any:
    # One worker pool per process: a warm worker makes a program's start cost
    # a fraction of a millisecond instead of a process spawn.
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            pool = require().Monty(min_processes=1, max_processes=16)
            pool.__enter__()
            atexit.register(pool.__exit__, None, None, None)
            _POOL = pool
        return _POOL


class Session:
    """One checked-out sandbox worker.

    Every blocking step runs in a worker thread that the caller abandons on
    cancellation (a step cannot be interrupted mid-turn); whoever holds the
    session last, the caller or an abandoned step, returns it to the pool.
    """

    __slots__ = ("_abandoned", "_lock", "_pid", "_session")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._pid: int | None = None
        self._abandoned = False

    @classmethod
    async def open(cls, limits: CodeModeLimits) -> Session:
        opened = cls()
        ready = False
        try:
            await opened.step(opened._checkout, limits)
            ready = True
        finally:
            if not ready:  # cancelled while waiting for a worker
                await opened.close()
        return opened

    def _checkout(self, limits: CodeModeLimits) -> None:
        session = _pool().checkout(
            script_name="program.py",
            limits={
                "max_memory": limits.memory,
                # Execution time only (the clock stops while tools run); the
                # caller's wall clock covers the rest.
                "max_feed_duration_secs": limits.wall_time,
                # Each tool call costs about two suspensions; sleeps and
                # lookups cost one. The call limit is enforced exactly by the host.
                "max_suspensions": 4 * limits.calls + 1000,
            },
            os_policy={"sleep_system_max": limits.wall_time},
        )
        session.__enter__()
        self._session = session
        # The worker is this session's alone until it is returned, so killing
        # it stops exactly this program; read while idle (it is None mid-turn).
        self._pid = session.worker_pid

    @property
    def session(self) -> Any:
        return self._session

    @property
    def closed(self) -> bool:
        return self._session is None

    async def step(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one blocking sandbox step in a worker thread."""

        def run() -> T:
            with self._lock:
                try:
                    return function(*args, **kwargs)
                finally:
                    if self._abandoned:
                        self._exit()

        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)

    async def close(self) -> None:
        """Return the worker to the pool, now or when an abandoned step ends."""
        self._abandoned = True  # first, so a step that ends meanwhile closes it
        if not self._lock.acquire(blocking=False):
            # A step is still running (cancelled, or past the deadline): stop
            # the program now rather than at its own time limit. The step then
            # fails with a crash and returns the session; the pool replaces
            # the worker.
            kill = getattr(signal, "SIGKILL", None)
            if self._pid is not None and kill is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, kill)
            return
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._exit)
        finally:
            self._lock.release()

    def _exit(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.__exit__(None, None, None)
