"""The manifest plugin: tools declared in TOML, each a command speaking JSON."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from builtin_calls import call_folders_held

import pegboard
from pegboard.testing import Example, check

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]

WORDS = """\
import json, sys
data = json.load(sys.stdin)
words = len(data["text"].split())
print(json.dumps({"output": {"words": words}, "content": f"{words} words"}))
"""
SHOUT = "import json, sys; print(json.load(sys.stdin)['text'].upper())"
FAILS = "import sys; sys.stderr.write('no such table: notes\\n'); sys.exit(3)"
# Starts a grandchild in the same process group, records both pids, then hangs.
HANGS = """\
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open("pids.txt", "w") as pids:
    pids.write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def toml(value: Any) -> str:
    """A value as a TOML inline value (the tests write manifests as a user would)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def manifest(**commands: tuple[str, dict[str, Any]]) -> str:
    """A manifest declaring one tool per script, in TOML."""
    lines = []
    for name, (script, extra) in commands.items():
        lines += [
            "[[tools]]",
            f'name = "{name}"',
            f'description = "The {name} tool."',
            f"command = [{json.dumps(sys.executable)}, {json.dumps(script)}]",
        ]
        lines += [f"{key} = {toml(value)}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


TEXT_INPUT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
WORDS_OUTPUT = {
    "type": "object",
    "properties": {"words": {"type": "integer"}},
    "required": ["words"],
}
TOOLS = manifest(
    words=("words.py", {"input": TEXT_INPUT, "output": WORDS_OUTPUT}),
    shout=("shout.py", {"input": TEXT_INPUT}),
    fails=("fails.py", {}),
    hangs=("hangs.py", {"timeout": 30}),
    slow=("hangs.py", {"timeout": 0.5}),
)
FILES = {
    "words.py": WORDS,
    "shout.py": SHOUT,
    "fails.py": FAILS,
    "hangs.py": HANGS,
    "tools.toml": TOOLS,
    "pegboard.toml": '[manifest]\nfiles = ["tools.toml"]\n',
}
ALLOW_ALL = [{"action": "*", "resource": "*", "effect": "allow"}]


def seed(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


@pytest.fixture
def sandbox_mode() -> str:
    """The sandbox the test's Location asks for (overridden by tests that need ``off``)."""
    return "auto"


#: These tests read the host process IDs a command writes; in the sandbox's PID
#: namespace those are not the host's, so they test the unconfined path.
host_pids = pytest.mark.parametrize("sandbox_mode", ["off"])


@pytest.fixture
async def manifested(
    host: pegboard.Host, workspace: Path, storage_dir: Path, sandbox_mode: str
) -> AsyncIterator[pegboard.Location]:
    seed(workspace, FILES)
    async with host.location(
        workspace,
        plugins=["manifest"],
        trusted=["manifest"],
        storage=storage_dir,
        permissions=ALLOW_ALL,
        sandbox=sandbox_mode,  # type: ignore[arg-type]
    ) as location:
        assert () == location.plugin_errors
        yield location


async def call(location: pegboard.Location, context: Context, name: str, **input: Any) -> Any:
    request = location.prepare()
    return await request.execute(pegboard.ToolCall(name, input, context()))


async def test_a_manifest_tool_runs_end_to_end(
    manifested: pegboard.Location, context: Context
) -> None:
    """Decoded input goes in as JSON; a JSON response gives output and content."""
    outcome = await call(manifested, context, "words", text="buy more milk")
    assert isinstance(outcome, pegboard.Completed), outcome
    assert {"words": 3} == outcome.output
    assert (pegboard.Text("3 words"),) == outcome.content
    definitions = {d.name: d for d in manifested.prepare().definitions}
    assert "The words tool." == definitions["words"].description
    assert WORDS_OUTPUT == definitions["words"].output_schema


async def test_a_commands_folder_is_made_and_removed_off_the_event_loop(
    manifested: pegboard.Location, context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's temporary folder is made and removed in a worker thread: the event
    loop runs other tasks meanwhile."""
    async with call_folders_held(monkeypatch) as steps:
        outcome = await call(manifested, context, "shout", text="hi")
    assert isinstance(outcome, pegboard.Completed), outcome
    assert [("made", True), ("removed", True)] == [(step, ran) for step, _, ran in steps]


async def test_text_on_stdout_is_the_content(
    manifested: pegboard.Location, context: Context
) -> None:
    """A command that prints plain text answers the model with that text."""
    outcome = await call(manifested, context, "shout", text="quiet")
    assert (pegboard.Text("QUIET\n"),) == outcome.content


async def test_invalid_input_never_runs_the_command(
    manifested: pegboard.Location, context: Context, workspace: Path
) -> None:
    """The input schema is checked before anything starts."""
    outcome = await call(manifested, context, "shout", text=7)
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_input" == outcome.error.kind


async def test_a_failing_command_is_a_tool_failure_with_its_stderr(
    manifested: pegboard.Location, context: Context
) -> None:
    """A non-zero exit tells the model the status and what the command said."""
    outcome = await call(manifested, context, "fails")
    assert isinstance(outcome, pegboard.Failed)
    assert "tool_failure" == outcome.error.kind
    assert "the command exited with status 3: no such table: notes" == outcome.error.message


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in "ZX"  # a zombie has ended; only its parent has not reaped it yet


async def _gone(pids: list[int]) -> bool:
    """Whether every pid has stopped running (SIGKILL lands within moments)."""
    with anyio.move_on_after(5):
        while any(map(_running, pids)):  # noqa: ASYNC110 - polling another process
            await anyio.sleep(0.02)
    return not any(map(_running, pids))


async def _pids(workspace: Path) -> list[int]:
    """The pids the hanging script wrote, once it has written them."""
    path = workspace / "pids.txt"
    with anyio.fail_after(30):
        while not path.exists() or not path.read_text().strip():  # noqa: ASYNC110 - a file
            await anyio.sleep(0.02)
    return [int(pid) for pid in path.read_text().split()]


@host_pids
async def test_a_timeout_stops_the_command_and_its_children(
    manifested: pegboard.Location, context: Context, workspace: Path
) -> None:
    """Past its timeout the whole process group is gone and the model is told."""
    outcome = await call(manifested, context, "slow")
    assert isinstance(outcome, pegboard.Failed)
    assert "did not finish within 0.5 s" in outcome.error.message
    assert await _gone(await _pids(workspace))


@host_pids
async def test_law_canonical_representation_a_cancelled_manifest_call_has_no_outcome(
    manifested: pegboard.Location, context: Context, workspace: Path
) -> None:
    """Cancelling the call stops the command and its children; no outcome is returned."""
    outcomes: list[pegboard.Outcome] = []
    with anyio.move_on_after(30):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcomes.append(await call(manifested, context, "hangs"))

            group.start_soon(run)
            pids = await _pids(workspace)
            group.cancel_scope.cancel()
    assert [] == outcomes
    assert await _gone(pids)


async def test_law_host_authority_every_call_asks_permission(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A deny rule for the command stops it; the command never runs."""
    seed(workspace, FILES)
    rules = [*ALLOW_ALL, {"action": "bash", "resource": "*shout.py", "effect": "deny"}]
    async with host.location(
        workspace, plugins=["manifest"], trusted=["manifest"], storage=storage_dir,
        permissions=rules,
    ) as location:  # fmt: skip
        outcome = await call(location, context, "shout", text="x")
    assert isinstance(outcome, pegboard.Failed)
    assert "permission denied: bash on" in outcome.error.message


async def test_law_host_authority_an_untrusted_manifest_plugin_runs_nothing(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Only the host can let a Location's manifests run commands."""
    seed(workspace, FILES)
    async with host.location(workspace, plugins=["manifest"], storage=storage_dir) as location:
        assert () == location.prepare().definitions
        [error] = location.plugin_errors
    assert "host.location(trusted=['manifest'])" in error.message


async def test_a_broken_manifest_is_reported_and_the_others_load(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """One bad file does not cost the tools of the good ones; the report names the field."""
    seed(workspace, FILES)
    (workspace / "bad.toml").write_text('[[tools]]\nname = "x"\ncommand = ["true"]\n')
    (workspace / "pegboard.toml").write_text('[manifest]\nfiles = ["bad.toml", "tools.toml"]\n')
    async with host.location(
        workspace, plugins=["manifest"], trusted=["manifest"], storage=storage_dir
    ) as location:
        names = {definition.name for definition in location.prepare().definitions}
        [error] = location.plugin_errors
    assert {"words", "shout", "fails", "hangs", "slow"} == names
    assert "manifest 'bad.toml' is not loaded" in error.message
    assert "tools[0]: 'description' is a required property" in error.message


async def test_a_manifest_cannot_take_a_builtin_tools_name(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A manifest tool named `bash` would silently replace the built-in: it is refused."""
    seed(workspace, FILES)
    (workspace / "tools.toml").write_text(manifest(bash=("shout.py", {"input": TEXT_INPUT})))
    async with host.location(
        workspace,
        plugins=["builtin", "manifest"],
        trusted=["manifest"],
        storage=storage_dir,
        permissions=ALLOW_ALL,
    ) as location:
        [error] = location.plugin_errors
        outcome = await call(location, lambda: pegboard.ToolContext("s", "a", "m", "c"), "bash",
                             command="echo built-in")  # fmt: skip
    assert "tool 'bash' has the name of a built-in tool" in error.message
    assert "built-in\n\n(exit code 0)" == outcome.content[0].text


PRINTS_TOO_MUCH = "import sys; sys.stdout.write('x' * (9 * 1024 * 1024))"
READS_THE_ENVIRONMENT = "import json, os; print(json.dumps(dict(os.environ)))"


async def test_output_past_the_cap_is_a_failed_call_not_an_exception(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A command printing more than 8 MB fails with the documented message."""
    seed(workspace, {**FILES, "loud.py": PRINTS_TOO_MUCH})
    (workspace / "tools.toml").write_text(manifest(loud=("loud.py", {})))
    async with host.location(
        workspace, plugins=["manifest"], trusted=["manifest"], storage=storage_dir,
        permissions=ALLOW_ALL,
    ) as location:  # fmt: skip
        outcome = await call(location, context, "loud")
    assert isinstance(outcome, pegboard.Failed)
    assert "printed more than 8,388,608 bytes and was stopped" in outcome.error.message


async def test_law_enforced_authority_a_manifest_command_sees_no_host_secret(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Context,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's variables stay out of manifest commands; network is asked when declared."""
    monkeypatch.setenv("PEGBOARD_TEST_SECRET", "do-not-leak")
    seed(workspace, {**FILES, "env.py": READS_THE_ENVIRONMENT})
    (workspace / "tools.toml").write_text(
        manifest(env=("env.py", {}), online=("env.py", {"network": True}))
    )
    asked: list[str] = []

    async def approver(request: pegboard.PermissionRequest) -> str | pegboard.Reject:
        asked.append(request.action)
        return pegboard.Reject("offline") if request.action == "network" else "once"

    rules = [{"action": "bash", "resource": "*", "effect": "allow"}]
    async with host.location(
        workspace, plugins=["manifest"], trusted=["manifest"], storage=storage_dir,
        permissions=rules, approver=approver,
    ) as location:  # fmt: skip
        seen = await call(location, context, "env")
        refused = await call(location, context, "online")
    assert isinstance(seen, pegboard.Completed)
    shown = json.loads(seen.content[0].text)
    assert "PEGBOARD_TEST_SECRET" not in shown
    assert "/tmp" == shown["TMPDIR"]
    assert isinstance(refused, pegboard.Failed)
    assert "the user rejected network: offline" == refused.error.message
    assert ["network"] == asked


def test_the_kit_checks_a_manifest_as_it_checks_a_python_plugin(tmp_path: Path) -> None:
    """pegboard's conformance kit runs on the manifest plugin with its files."""
    files = {name: textwrap.dedent(text) for name, text in FILES.items() if name != "hangs.py"}
    files["tools.toml"] = manifest(
        words=("words.py", {"input": TEXT_INPUT, "output": WORDS_OUTPUT}),
        shout=("shout.py", {"input": TEXT_INPUT}),
    )
    report = check(
        "manifest",
        trusted=True,
        options={"files": ["tools.toml"]},
        files=files,
        examples=[Example(tool="words", input={"text": "a b"})],
        generated=5,
        directory=tmp_path,
    )
    assert report.passed, report.format()
