"""Who approves a served call: the operator's rules, and a client only when let."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client, StdioServerParameters

import pegboard.mcp
from pegboard.mcp._approver import current_channel

pytestmark = pytest.mark.anyio

ERAS = ["auto", "legacy"]


def launcher(permissions: pegboard.Permissions, runs: list[str]) -> pegboard.Tool:
    async def launch(input: dict[str, Any], context: pegboard.ToolContext) -> str:
        target = input.get("target", "rocket")
        await permissions.ask(pegboard.PermissionRequest(action="launch", resources=[target]))
        runs.append(target)
        return f"launched {target}"

    schema = {"type": "object", "properties": {"target": {"type": "string"}}}
    return pegboard.tool(description="Launch, with permission.", execute=launch, input=schema)


class Elicitations:
    """A client's elicitation handler that answers with ``reply`` and counts questions."""

    def __init__(self, reply: types.ElicitResult) -> None:
        self.reply = reply
        self.asked: list[str] = []

    async def __call__(
        self, context: object, params: types.ElicitRequestFormParams
    ) -> types.ElicitResult:
        self.asked.append(params.message)
        return self.reply


ALWAYS = types.ElicitResult(action="accept", content={"decision": "always"})


def client(location: pegboard.Location, era: str, **options: Any) -> Client:
    return Client(pegboard.mcp.build_server(location), mode=era, **options)


@pytest.fixture
async def opened(
    host: pegboard.Host, workspace: Path, storage_dir: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[pegboard.Location, list[str]]]:
    approver = (
        pegboard.mcp.ClientApprover(client_approval=True)
        if getattr(request, "param", False)
        else pegboard.mcp.ClientApprover()  # the default: clients do not approve
    )
    runs: list[str] = []
    async with host.location(
        workspace, plugins=[], storage=storage_dir, approver=approver
    ) as location:
        location.tools.register({"launch": launcher(location.permissions, runs)})
        yield location, runs


@pytest.mark.parametrize("era", ERAS)
async def test_law_host_authority_clients_do_not_approve_their_own_requests(
    opened: tuple[pegboard.Location, list[str]], era: str
) -> None:
    """Without client approval, an ask is a tool result naming the rule to add; the
    client is never asked, even when it could answer.
    """
    location, runs = opened
    elicit = Elicitations(ALWAYS)
    async with client(location, era, elicitation_callback=elicit) as mcp:
        result = await mcp.call_tool("launch", {"target": "moon"})
    assert ([], []) == (elicit.asked, runs)
    assert result.is_error
    [block] = result.content
    assert isinstance(block, types.TextContent)
    assert "start pegboard serve with --allow launch:moon" in block.text


@pytest.mark.parametrize("opened", [True], indirect=True)
@pytest.mark.parametrize("era", ERAS)
async def test_law_host_authority_a_clients_always_is_never_saved(
    opened: tuple[pegboard.Location, list[str]],
    host: pegboard.Host,
    era: str,
) -> None:
    """With client approval, "always" holds for this server process only: nothing is
    written for the Location, and the next server asks again.
    """
    from pegboard._permissions import default_approvals_file

    location, runs = opened
    elicit = Elicitations(ALWAYS)
    async with client(location, era, elicitation_callback=elicit) as mcp:
        first = await mcp.call_tool("launch", {})
        second = await mcp.call_tool("launch", {})
        other = await mcp.call_tool("launch", {"target": "moon"})
    assert ["launched rocket", "launched rocket", "launched moon"] == [
        result.content[0].text  # type: ignore[union-attr]
        for result in (first, second, other)
    ]
    assert ["Allow launch on rocket?", "Allow launch on moon?"] == elicit.asked
    assert not default_approvals_file(location.root).exists()
    # A new server process (approver) on the same Location asks again.
    again = Elicitations(types.ElicitResult(action="decline"))
    async with host.location(
        location.root, plugins=[], approver=pegboard.mcp.ClientApprover(client_approval=True)
    ) as reopened:
        reopened.tools.register({"launch": launcher(reopened.permissions, runs)})
        async with client(reopened, era, elicitation_callback=again) as mcp:
            refused = await mcp.call_tool("launch", {})
    assert (["Allow launch on rocket?"], True) == (again.asked, refused.is_error)


@pytest.mark.parametrize("opened", [True], indirect=True)
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (types.ElicitResult(action="decline"), "the user rejected launch"),
        (types.ElicitResult(action="cancel"), "the user rejected launch"),
        (
            types.ElicitResult(action="accept", content={"decision": "reject"}),
            "the user rejected launch",
        ),
        (
            types.ElicitResult(action="accept", content={"decision": "reject", "feedback": "no"}),
            "the user rejected launch: no",
        ),
    ],
    ids=["decline", "cancel", "reject", "feedback"],
)
async def test_a_rejection_is_a_tool_result(
    opened: tuple[pegboard.Location, list[str]],
    era: str,
    reply: types.ElicitResult,
    message: str,
) -> None:
    """A user's rejection, with or without feedback, is isError, never a protocol error."""
    location, runs = opened
    async with client(location, era, elicitation_callback=Elicitations(reply)) as mcp:
        result = await mcp.call_tool("launch", {})
    assert (True, message, []) == (result.is_error, result.content[0].text, runs)  # type: ignore[union-attr]


class Pending:
    """A permission channel whose client takes its time (or answers at once)."""

    def __init__(self, answered: anyio.Event | None = None) -> None:
        self.answered = answered

    @property
    def can_elicit(self) -> bool:
        return True

    async def elicit(self, request: pegboard.PermissionRequest) -> Any:
        if self.answered is not None:
            await self.answered.wait()
        return "once"


async def test_an_unanswered_approval_does_not_block_other_clients() -> None:
    """While one client leaves a question open, another client's question is answered."""
    approver = pegboard.mcp.ClientApprover(client_approval=True)
    answered = anyio.Event()
    done: list[str] = []

    async def ask(channel: Pending, name: str) -> None:
        current_channel.set(channel)
        await approver(pegboard.PermissionRequest(action="launch", resources=[name]))
        done.append(name)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask, Pending(answered), "slow")
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(5):
            await ask(Pending(), "quick")
        answered.set()
    assert ["quick", "slow"] == done


class Stalling:
    """A client's elicitation handler that never answers until told to."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def __call__(
        self, context: object, params: types.ElicitRequestFormParams
    ) -> types.ElicitResult:
        self.asked.set()
        await self.release.wait()
        return types.ElicitResult(action="decline")


@pytest.mark.parametrize("opened", [True], indirect=True)
@pytest.mark.parametrize("target", ["rocket", "moon"], ids=["same-question", "other-question"])
async def test_an_open_question_holds_up_only_its_own_client(
    opened: tuple[pegboard.Location, list[str]], target: str
) -> None:
    """While one client leaves its question unanswered, another client's call, the same
    question or another, is asked of that client and runs; the first client's answer
    never decides the second client's call.
    """
    location, runs = opened
    stalling = Stalling()
    answering = Elicitations(types.ElicitResult(action="accept", content={"decision": "once"}))
    async with (
        client(location, "legacy", elicitation_callback=stalling) as slow,
        client(location, "legacy", elicitation_callback=answering) as quick,
        anyio.create_task_group() as tasks,
    ):
        refused: list[types.CallToolResult] = []

        async def stall() -> None:
            refused.append(await slow.call_tool("launch", {"target": "rocket"}))

        tasks.start_soon(stall)
        with anyio.fail_after(10):
            await stalling.asked.wait()
            result = await quick.call_tool("launch", {"target": target})
        stalling.release.set()
    assert ([f"Allow launch on {target}?"], [target]) == (answering.asked, runs)
    assert f"launched {target}" == result.content[0].text  # type: ignore[union-attr]
    assert refused[0].is_error


@pytest.fixture
def builtin_server(tmp_path: Path, workspace: Path) -> list[str]:
    """`pegboard serve` on a Location with the built-in tools, as a client starts it."""
    (workspace / "notes.txt").write_text("hello from the Location\n")
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    return [command, "serve", "--location", str(workspace)]


@pytest.mark.parametrize("era", ERAS)
async def test_law_host_authority_serve_allow_read_lets_any_client_read(
    builtin_server: list[str], tmp_path: Path, era: str
) -> None:
    """A client without elicitation reads a file with `pegboard serve --allow read`;
    without the rule, even a client that would approve is refused, and told which rule
    the operator could add.
    """
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "PATH": os.environ.get("PATH", "")}
    command, *arguments = builtin_server
    server = StdioServerParameters(command=command, args=arguments, env=env)
    would_approve = Elicitations(types.ElicitResult(action="accept", content={"decision": "once"}))
    async with Client(server, mode=era, elicitation_callback=would_approve) as mcp:
        refused = await mcp.call_tool("read", {"path": "notes.txt"})
    assert [] == would_approve.asked
    server = StdioServerParameters(command=command, args=[*arguments, "--allow", "read"], env=env)
    async with Client(server, mode=era) as mcp:
        allowed = await mcp.call_tool("read", {"path": "notes.txt"})
    assert refused.is_error
    assert "start pegboard serve with --allow read:notes.txt" in refused.content[0].text  # type: ignore[union-attr]
    assert not allowed.is_error
    assert "hello from the Location" in allowed.content[0].text  # type: ignore[union-attr]


async def test_serve_client_approval_lets_the_client_answer(
    builtin_server: list[str], tmp_path: Path
) -> None:
    """`pegboard serve --client-approval` asks the client; its "always" is not saved."""
    data = tmp_path / "data"
    env = {"XDG_DATA_HOME": str(data), "PATH": os.environ.get("PATH", "")}
    command, *arguments = builtin_server
    server = StdioServerParameters(command=command, args=[*arguments, "--client-approval"], env=env)
    elicit = Elicitations(ALWAYS)
    async with Client(server, mode="legacy", elicitation_callback=elicit) as mcp:
        first = await mcp.call_tool("read", {"path": "notes.txt"})
        second = await mcp.call_tool("read", {"path": "notes.txt"})
    assert [False, False] == [first.is_error, second.is_error]
    assert ["Allow read on notes.txt?"] == elicit.asked
    assert [] == list((data / "pegboard").glob("approvals/*"))
