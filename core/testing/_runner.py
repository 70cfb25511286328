"""A fake runner for tests: tool contexts with fresh call IDs, and their progress."""

from __future__ import annotations

import functools

import attrs

from pegboard import Progress, ToolContext

__all__ = ("FakeRunner",)


@attrs.define
class FakeRunner:
    """Makes `pegboard.ToolContext` values the way a runner would, and keeps progress.

    ``runner()`` returns a context with a fresh ``call_id`` (``runner("c7")``
    picks one); every `pegboard.Progress` a tool reports through it is kept in
    ``reports`` as ``(call_id, progress)``, in order.
    """

    session_id: str = "session-1"
    agent: str = "agent-1"
    message_id: str = "message-1"
    reports: list[tuple[str, Progress]] = attrs.field(factory=list)
    _calls: int = attrs.field(default=0, repr=False)

    def __call__(self, call_id: str | None = None) -> ToolContext:
        """A context for one call; ``call_id`` defaults to ``call-1``, ``call-2``, …"""
        self._calls += 1
        call_id = call_id or f"call-{self._calls}"
        return ToolContext(
            session_id=self.session_id,
            agent=self.agent,
            message_id=self.message_id,
            call_id=call_id,
            progress=functools.partial(self._record, call_id),
        )

    @property
    def progress(self) -> list[Progress]:
        """Every progress report, from every call, in order."""
        return [progress for _, progress in self.reports]

    def progress_of(self, call_id: str) -> list[Progress]:
        """The progress reports of one call, in order."""
        return [progress for seen, progress in self.reports if seen == call_id]

    async def _record(self, call_id: str, progress: Progress) -> None:
        self.reports.append((call_id, progress))
