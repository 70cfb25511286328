"""Request.execute_all: one step's calls, concurrently, outcomes in call order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import pegboard

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


class Step:
    """Tools that wait for each other, so only concurrent execution can finish them."""

    def __init__(self) -> None:
        self.first_done = anyio.Event()
        self.cancelled: list[str] = []
        self.finished: list[str] = []

    def tools(self) -> dict[str, pegboard.Tool]:
        async def slow(input: Any, context: pegboard.ToolContext) -> str:
            try:
                await self.first_done.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(context.call_id)
                raise
            self.finished.append(context.call_id)
            return f"slow {context.call_id}"

        async def fast(input: Any, context: pegboard.ToolContext) -> str:
            await anyio.lowlevel.checkpoint()
            self.first_done.set()
            self.finished.append(context.call_id)
            return f"fast {context.call_id}"

        async def broken(input: Any, context: pegboard.ToolContext) -> str:
            await anyio.lowlevel.checkpoint()
            raise LookupError(f"bug in {context.call_id}")

        async def doomed(input: Any, context: pegboard.ToolContext) -> str:
            # Shielded, so a sibling's defect cannot cancel it before it raises too.
            with anyio.CancelScope(shield=True):
                await self.first_done.wait()
            raise LookupError(f"bug in {context.call_id}")

        async def hang(input: Any, context: pegboard.ToolContext) -> str:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(context.call_id)
                raise
            raise AssertionError("unreachable")

        return {
            name: pegboard.tool(description=f"The {name} tool.", execute=execute)
            for name, execute in {
                "slow": slow,
                "fast": fast,
                "broken": broken,
                "hang": hang,
                "doomed": doomed,
            }.items()
        }


@pytest.fixture
def step(location: pegboard.Location) -> Step:
    made = Step()
    location.tools.register(made.tools())
    return made


def _texts(outcomes: list[pegboard.Outcome]) -> list[str]:
    texts = []
    for outcome in outcomes:
        assert isinstance(outcome, pegboard.Completed)
        assert isinstance(outcome.content[0], pegboard.Text)
        texts.append(outcome.content[0].text)
    return texts


async def test_calls_run_concurrently_and_outcomes_keep_call_order(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """The first call waits for the second: it finishes only if they run together."""
    calls = [
        pegboard.ToolCall("slow", "{}", context("c1")),
        pegboard.ToolCall("fast", "{}", context("c2")),
    ]
    with anyio.fail_after(5):
        outcomes = await location.prepare().execute_all(calls)
    assert ["slow c1", "fast c2"] == _texts(outcomes)
    assert ["c2", "c1"] == step.finished
    assert ["c1", "c2"] == [outcome.call.call_id for outcome in outcomes if outcome.call]


async def test_law_per_call_rejection_in_one_step(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """Unknown and invalid calls fail alone; their siblings complete."""
    calls = [
        pegboard.ToolCall("ghost", "{}", context("c1")),
        pegboard.ToolCall("slow", "{}", context("c2")),
        pegboard.ToolCall("fast", "not json", context("c3")),
        pegboard.ToolCall("fast", "{}", context("c4")),
    ]
    with anyio.fail_after(5):
        outcomes = await location.prepare().execute_all(calls)
    assert [pegboard.Failed, pegboard.Completed, pegboard.Failed, pegboard.Completed] == [
        type(outcome) for outcome in outcomes
    ]
    assert ["c1", "c2", "c3", "c4"] == [o.call.call_id for o in outcomes if o.call]


async def test_a_defect_cancels_the_siblings_and_propagates_unchanged(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """A tool's unexpected exception is raised as itself; the other calls are cancelled."""
    calls = [
        pegboard.ToolCall("hang", "{}", context("c1")),
        pegboard.ToolCall("broken", "{}", context("c2")),
        pegboard.ToolCall("slow", "{}", context("c3")),
    ]
    with anyio.fail_after(5), pytest.raises(LookupError, match="bug in c2") as raised:
        await location.prepare().execute_all(calls)
    assert type(raised.value) is LookupError
    assert ["c1", "c3"] == sorted(step.cancelled)
    assert [] == step.finished


async def test_several_defects_propagate_together(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """Two calls that raise at once are both reported, in an ExceptionGroup."""
    calls = [
        pegboard.ToolCall("doomed", "{}", context("c1")),
        pegboard.ToolCall("doomed", "{}", context("c2")),
        pegboard.ToolCall("fast", "{}", context("c3")),
    ]
    with anyio.fail_after(5), pytest.raises(ExceptionGroup) as raised:
        await location.prepare().execute_all(calls)
    assert ["bug in c1", "bug in c2"] == sorted(str(error) for error in raised.value.exceptions)


async def test_cancelling_the_step_cancels_every_call_and_returns_nothing(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """Cancellation propagates as cancellation: no outcome, every call sees it."""
    calls = [
        pegboard.ToolCall("hang", "{}", context("c1")),
        pegboard.ToolCall("hang", "{}", context("c2")),
    ]
    returned: list[pegboard.Outcome] | None = None
    with anyio.move_on_after(0.05) as scope:
        returned = await location.prepare().execute_all(calls)
    assert scope.cancelled_caught
    assert returned is None
    assert ["c1", "c2"] == sorted(step.cancelled)


async def test_a_bad_call_is_refused_before_any_call_runs(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """A value that is not a ToolCall raises TypeError and nothing executes."""
    calls: list[Any] = [pegboard.ToolCall("fast", "{}", context("c1")), ("fast", "{}")]
    with pytest.raises(TypeError, match="execute_all"):
        await location.prepare().execute_all(calls)
    assert [] == step.finished


async def test_no_calls_and_one_call(
    location: pegboard.Location, context: Context, step: Step
) -> None:
    """An empty step gives no outcomes; a single call gives its one outcome."""
    request = location.prepare()
    assert [] == await request.execute_all([])
    assert ["fast c1"] == _texts(
        await request.execute_all(iter([pegboard.ToolCall("fast", "{}", context("c1"))]))
    )


async def test_law_per_call_rejection_a_rejected_permission_is_that_calls_failed_outcome(
    host: pegboard.Host, workspace: Any, storage_dir: Any, context: Context
) -> None:
    """A bare Reject() from the approver fails its call alone; the siblings complete."""

    async def says_no(request: pegboard.PermissionRequest) -> pegboard.Reject:
        return pegboard.Reject()

    made = Step()
    async with host.location(
        workspace, plugins=["builtin"], storage=storage_dir, approver=says_no
    ) as location:
        location.tools.register(made.tools())
        calls = [
            pegboard.ToolCall("slow", "{}", context("c1")),
            pegboard.ToolCall("write", {"path": "a.txt", "content": "x"}, context("c2")),
            pegboard.ToolCall("fast", "{}", context("c3")),
        ]
        with anyio.fail_after(5):
            outcomes = await location.prepare().execute_all(calls)
    slow, write, fast = outcomes
    assert ["slow c1", "fast c3"] == _texts([slow, fast])
    assert isinstance(write, pegboard.Failed)
    assert "rejected" == write.error.kind
    assert "the user rejected" in write.error.message
    assert write.call is not None
    assert "c2" == write.call.call_id
    assert "write" == write.name
    assert write.error.metadata is not None
    assert write.error.metadata["action"]
    assert not (workspace / "a.txt").exists()


async def test_law_per_call_rejection_a_rejected_permission_alone_in_its_step_is_its_failed_outcome(
    host: pegboard.Host, workspace: Any, storage_dir: Any, context: Context
) -> None:
    """A step of one call takes the same path: the bare Reject() is its Failed outcome."""

    async def says_no(request: pegboard.PermissionRequest) -> pegboard.Reject:
        return pegboard.Reject()

    async with host.location(
        workspace, plugins=["builtin"], storage=storage_dir, approver=says_no
    ) as location:
        call = pegboard.ToolCall("write", {"path": "a.txt", "content": "x"}, context("c1"))
        (write,) = await location.prepare().execute_all([call])
    assert isinstance(write, pegboard.Failed)
    assert ("rejected", "c1") == (write.error.kind, write.call and write.call.call_id)
    assert not (workspace / "a.txt").exists()
