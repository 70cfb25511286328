"""The mcp plugin mounts the official reference server, @modelcontextprotocol/server-everything.

scripts/check.py installs the pinned server and Node 22 in ``.ci-node``. One
server process (streamable HTTP) serves the whole test session, each test
mounting it afresh, so each has a session of its own on the server; those tests
run on asyncio only, as the SDK's HTTP client leaves streams to the garbage
collector on trio. The tests marked ``STDIO`` start the server as a user's
config does, over stdio, on both back ends.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types

pytestmark = pytest.mark.anyio
#: The tests that share the session's HTTP server.
HTTP = pytest.mark.parametrize("anyio_backend", ["asyncio"])

ROOT = Path(__file__).resolve().parent.parent
#: A task of simulate-research-query takes four one-second stages.
TASK_SECONDS = 30
#: Node starts the server in well under a second; a busy machine may take longer.
STARTUP_SECONDS = 30


def _check_script() -> ModuleType:
    """scripts/check.py, which pins and installs Node and the reference server."""
    spec = importlib.util.spec_from_file_location("pegboard_check", ROOT / "scripts" / "check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _check_script()
PREFIX: Path = CHECK.NODE_PREFIX
NODE = PREFIX / "node_modules" / "node" / "bin" / "node"
EVERYTHING = (
    PREFIX / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def installed() -> tuple[str, str]:
    """Node and the server's entry point, or a failure that says how to install them."""
    if not NODE.exists() or not EVERYTHING.exists():
        pytest.fail(
            "Node 22 and @modelcontextprotocol/server-everything are not installed; run "
            "python3 scripts/check.py (or: npm install --prefix .ci-node "
            + " ".join(CHECK.NODE_PACKAGES)
            + ")"
        )
    return str(NODE), str(EVERYTHING)


@pytest.fixture(scope="session")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of one server-everything process, started once for the session."""
    installed()
    port = _free_port()
    said = tmp_path_factory.mktemp("everything") / "stderr.txt"
    with said.open("w") as stderr:
        process = subprocess.Popen(
            [str(NODE), str(EVERYTHING), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "listening on port" not in said.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"server-everything did not start: {said.read_text()}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextlib.asynccontextmanager
async def mounted(
    url: str | None, root: Path, *, elicit: pegboard.Elicit | None = None, **server: Any
) -> AsyncIterator[pegboard.Request]:
    """The server mounted as ``ev``: at ``url``, or over stdio when it is None."""
    where = {"url": url} if url is not None else {"command": [*installed(), "stdio"]}
    plugins = [{"name": "mcp", "options": {"servers": {"ev": {**where, **server}}}}]
    async with pegboard.Host().location(
        root,
        plugins=plugins,
        trusted=["mcp"],
        permissions=[{"action": "mcp.*", "effect": "allow"}],
        elicit=elicit,
    ) as location:
        assert [] == list(location.plugin_errors)
        yield location.prepare()


class Runner:
    """A runner's context that keeps every log message and progress report."""

    def __init__(self) -> None:
        self.logs: list[pegboard.ToolLog] = []
        self.progress: list[pegboard.Progress] = []
        self.context = pegboard.ToolContext(
            "session", "agent", "message", "call", progress=self._progress, log=self._log
        )

    async def _progress(self, update: pegboard.Progress) -> None:
        self.progress.append(update)

    async def _log(self, entry: pegboard.ToolLog) -> None:
        self.logs.append(entry)

    async def call(self, request: pegboard.Request, name: str, **input: Any) -> pegboard.Outcome:
        return await request.execute(pegboard.ToolCall(name, input, self.context))


@HTTP
async def test_the_mount_keeps_execution_and_every_field_it_does_not_use(
    everything: str, workspace: Path
) -> None:
    """execution.taskSupport (and any field pegboard's definition has no place for)
    reaches ToolDefinition.extra as the server sent it; a task-required tool is mounted.
    """
    async with mounted(everything, workspace) as request:
        definitions = {definition.name: definition for definition in request.definitions}
    research = definitions["ev_simulate-research-query"]
    assert {"execution": {"taskSupport": "required"}} == research.extra
    assert {"execution": {"taskSupport": "forbidden"}} == definitions["ev_echo"].extra
    assert "Simulate Research Query" == research.title
    assert "name" not in (research.extra or {})


@HTTP
async def test_log_messages_reach_the_calling_tools_context(
    everything: str, workspace: Path
) -> None:
    """A server's notifications/message during a call go to that call's context.log,
    at every level from the configured log_level up (logging/setLevel).
    """
    runner = Runner()
    async with mounted(everything, workspace, log_level="debug") as request:
        started = await runner.call(request, "ev_toggle-simulated-logging")
        await runner.call(request, "ev_toggle-simulated-logging")  # and off again
    assert isinstance(started, pegboard.Completed)
    assert runner.logs, "the message sent during the call was not forwarded"
    [entry, *_] = runner.logs
    # The server picks a level at random and names it in the message.
    assert entry.message.lower().startswith(entry.level), entry
    assert entry.data is None


@HTTP
async def test_a_task_required_tool_runs_as_a_task_and_its_question_reaches_the_host(
    everything: str, workspace: Path
) -> None:
    """simulate-research-query requires a task: the mount creates it, follows its status
    messages as progress, answers the question it asks through the host's handler, and
    returns its result.
    """
    asked: list[pegboard.Elicitation] = []

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        asked.append(question)
        return pegboard.ElicitationAnswer("accept", {"interpretation": "programming"})

    runner = Runner()
    async with mounted(everything, workspace, elicit=elicit) as request:
        with anyio.fail_after(TASK_SECONDS):
            outcome = await runner.call(
                request, "ev_simulate-research-query", topic="python", ambiguous=True
            )
    assert isinstance(outcome, pegboard.Completed), outcome
    assert "# Research Report: python (programming)" in outcome.content[0].text  # type: ignore[union-attr]
    [question] = asked
    assert "MCP server 'ev'" == question.source
    assert question.schema is not None
    assert ["interpretation"] == list(question.schema["required"])
    said = [update.message for update in runner.progress]
    assert "Gathering sources..." == said[0]
    assert len(said) == len(set(said)), "a status message is reported once"


@HTTP
async def test_elicitation_goes_to_the_hosts_handler_and_a_refusal_is_no_success(
    everything: str, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With a handler, the server's form reaches it and each answer goes back: an
    accepted form succeeds, a decline or a cancel fails the call with the server's text,
    and so does an answer that does not fit the form, or a handler that raises.
    """
    answers: list[Any] = [
        pegboard.ElicitationAnswer("accept", {"name": "Ada Lovelace", "check": True}),
        pegboard.ElicitationAnswer("decline"),
        pegboard.ElicitationAnswer("cancel"),
        pegboard.ElicitationAnswer("accept", {"check": "yes"}),  # 'name' missing, wrong type
        RuntimeError("the dialog crashed"),
        "accept",  # not an ElicitationAnswer
    ]
    asked: list[pegboard.Elicitation] = []

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        asked.append(question)
        answer = answers[len(asked) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    runner = Runner()
    caplog.set_level("WARNING", logger="pegboard")
    async with mounted(everything, workspace, elicit=elicit) as request:
        outcomes = [await runner.call(request, "ev_trigger-elicitation-request") for _ in answers]
    accepted, declined, cancelled, unfit, crashed, wrong = outcomes
    assert isinstance(accepted, pegboard.Completed)
    assert "- Name: Ada Lovelace" in accepted.content[1].text  # type: ignore[union-attr]
    assert "Please provide inputs for the following fields:" == asked[0].message
    assert asked[0].schema is not None
    assert "email" in asked[0].schema["properties"]
    for outcome, said in ((declined, "declined"), (cancelled, "cancelled")):
        assert isinstance(outcome, pegboard.Failed)
        assert "tool_failure" == outcome.error.kind
        assert f"was {said} by the user, so the call is not a success" in outcome.error.message
        assert "the server said: " in outcome.error.message
    for outcome in (unfit, crashed, wrong):
        # The server hears an error and fails the call; the host's log says why.
        assert isinstance(outcome, pegboard.Failed), outcome
        assert "the user could not be asked" in outcome.error.message
    assert [
        "'name' is a required property",
        "the dialog crashed",
        "the host's elicit handler returned str, not a pegboard.ElicitationAnswer",
    ] == [record.getMessage().split("the host's answer failed: ")[1] for record in caplog.records]


@HTTP
async def test_without_a_handler_the_mount_does_not_offer_elicitation(
    everything: str, workspace: Path
) -> None:
    """No elicit= handler, no elicitation capability: the server, which offers its
    elicitation tools only to clients that declare it, does not list them.
    """
    async with mounted(everything, workspace) as request:
        names = {definition.name for definition in request.definitions}
    assert "ev_echo" in names
    assert "ev_trigger-elicitation-request" not in names
    assert "ev_trigger-url-elicitation" not in names


@HTTP
async def test_invalid_input_lists_every_problem_and_the_servers_own_refusal_is_its_text(
    everything: str, workspace: Path
) -> None:
    """Input the schema refuses stays in pegboard, every problem named at once; input
    the schema allows but the server refuses fails with the server's own words.
    """
    runner = Runner()
    async with mounted(everything, workspace) as request:
        invalid = await runner.call(request, "ev_get-sum", a="one", c=3)
        refused = await runner.call(
            request, "ev_get-resource-reference", resourceType="Text", resourceId=1.5
        )
    assert isinstance(invalid, pegboard.Failed)
    assert "invalid_input" == invalid.error.kind
    message = invalid.error.message
    assert message.startswith("invalid input for tool 'ev_get-sum': 2 problems: ")
    assert "$: 'b' is required" in message
    assert "$.a: expected number, got string" in message
    assert isinstance(refused, pegboard.Failed)
    assert "tool_failure" == refused.error.kind
    assert "Invalid resourceId: 1.5. Must be a finite positive integer." in refused.error.message


async def test_over_stdio_logs_questions_and_fields_reach_the_host(workspace: Path) -> None:
    """Started as a Location's config starts it (command = [node, ..., "stdio"]), the
    server's definitions keep execution, its log messages reach the call, and its
    question reaches the host's handler.
    """
    answers: list[pegboard.Elicitation] = []

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        answers.append(question)
        return pegboard.ElicitationAnswer("accept", {"name": "Grace Hopper"})

    runner = Runner()
    async with mounted(None, workspace, elicit=elicit, log_level="debug") as request:
        definitions = {definition.name: definition for definition in request.definitions}
        await runner.call(request, "ev_toggle-simulated-logging")
        await runner.call(request, "ev_toggle-simulated-logging")
        asked = await runner.call(request, "ev_trigger-elicitation-request")
    assert {"execution": {"taskSupport": "required"}} == (
        definitions["ev_simulate-research-query"].extra
    )
    assert runner.logs, "the message sent during the call was not forwarded"
    assert isinstance(asked, pegboard.Completed), asked
    assert "- Name: Grace Hopper" in asked.content[1].text  # type: ignore[union-attr]
    assert 1 == len(answers)


async def test_a_task_is_cancelled_on_the_server_when_its_call_is_cancelled_or_times_out() -> None:
    """Cancelling a call whose tool runs as a task sends tasks/cancel; so does a task
    that outlives request_timeout, which fails the call saying so.
    """
    from pegboard.plugins_builtin.mcp._config import ServerConfig
    from pegboard.plugins_builtin.mcp._mount import Mount

    class Registration:
        def close(self) -> None:
            pass

    class Tools:
        def register(self, tools: dict[str, pegboard.Tool], namespace: str) -> Registration:
            return Registration()

    class Services:
        def report(self, problem: str, phase: str) -> None:
            raise AssertionError(problem)

    mount = Mount(
        ServerConfig(name="ev", command=(*installed(), "stdio"), request_timeout=1.5),
        tools=Tools(),  # type: ignore[arg-type]
        permissions=pegboard.Permissions([{"action": "*", "resource": "*", "effect": "allow"}]),
        services=Services(),  # type: ignore[arg-type]
        root=Path("."),
    )
    runner = Runner()
    arguments = {"topic": "rust", "ambiguous": False}
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(mount.run)
        with anyio.fail_after(TASK_SECONDS):
            await mount.ready.wait()
            with anyio.move_on_after(0.5):
                await mount.call(
                    "simulate-research-query", arguments, runner.context, has_output=False
                )
            with pytest.raises(
                pegboard.ToolFailure,
                match=r"did not finish 'simulate-research-query' within 1\.5 s; its task is cancel",
            ):
                await mount.call(
                    "simulate-research-query", arguments, runner.context, has_output=False
                )
            client = mount._client
            assert client is not None
            listing = await client.session.send_request(
                types.ListTasksRequest(), types.ListTasksResult
            )
        mount.stop()
    assert ["cancelled", "cancelled"] == [task.status for task in listing.tasks]
