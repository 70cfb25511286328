"""The host's secrets: granted to commands by rule, redacted from all a call publishes or keeps."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
from mcp import Client
from otel import Telemetry, installed

import pegboard
import pegboard.mcp
import pegboard.sandbox

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]

TOKEN = "ghp_4e1Xq9ZpT0k3nW7sLr2Yv8Bd"
DATABASE = "postgres://admin:s3cr3t+pass/word@db:5432/app?x=1&y=2"
UNGRANTED = "sk-never-given-to-commands-42"
SECRETS = {"TOKEN": TOKEN, "DATABASE_URL": DATABASE, "OTHER": UNGRANTED}
TRACE_PEER = str(Path(__file__).with_name("mcp_trace_peer.py"))


def encodings(value: str) -> set[str]:
    """The value and every encoding of it that must never appear."""
    raw = value.encode()
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        forms |= {encoded.decode(), encoded.decode().rstrip("=")}
    return forms


FORBIDDEN = set().union(*(encodings(value) for value in SECRETS.values()))


def leaks(texts: Iterable[str]) -> list[str]:
    """Every form of a secret found in ``texts``, with a little context."""
    found = []
    for text in texts:
        for form in FORBIDDEN:
            at = text.find(form)
            if at != -1:
                found.append(f"{form!r} in …{text[max(at - 40, 0) : at + len(form) + 40]!r}…")
    return found


def files(folder: Path) -> list[str]:
    return [
        path.read_bytes().decode("utf-8", "replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


# -- the tools that leak -------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def b64(value: str, *, urlsafe: bool = False, padded: bool = True) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(value.encode()).decode()
    return text if padded else text.rstrip("=")


def leaking_tools() -> dict[str, pegboard.Tool]:
    """One tool per way a tool can put a secret in what it returns or reports."""

    def text(make: Callable[[], object]) -> pegboard.Tool:
        async def execute(input: Any, context: pegboard.ToolContext) -> object:
            return make()

        return pegboard.tool(description="Leak.", input=SCHEMA, execute=execute)

    async def fails(input: Any, context: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure(
            f"cannot log in with {TOKEN}", metadata={"tried": [{"url": DATABASE}]}
        )

    async def reports(input: Any, context: pegboard.ToolContext) -> str:
        for step in range(3):
            await context.progress(
                pegboard.Progress(
                    message=f"step {step} with {TOKEN}",
                    current=step,
                    total=3,
                    content=[pegboard.Text(f"partial {step}: {DATABASE}")],
                )
            )
        raise pegboard.ToolFailure("gave up")

    async def reports_then_completes(input: Any, context: pegboard.ToolContext) -> str:
        await context.progress(pegboard.Progress(content=[pegboard.Text(b64(TOKEN))]))
        # A context of its own making still reports to the runner's callback.
        other = attrs.evolve(context, call_id="elsewhere")
        await other.progress(pegboard.Progress(message=f"aside {DATABASE}"))
        return "done"

    async def outputs(input: Any, context: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(
            output={"auth": {"header": f"Bearer {TOKEN}"}, "urls": [DATABASE]},
            content=f"logged in as {TOKEN}",
        )

    async def wrong_output(input: Any, context: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output={"n": TOKEN})

    async def bad_metadata(input: Any, context: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(content="ok", metadata={TOKEN: object()})

    async def crashes(input: Any, context: pegboard.ToolContext) -> str:
        raise RuntimeError(f"bug near {TOKEN}")

    head = "h" * 1990
    tools = {
        "plain": text(lambda: f"token={TOKEN}"),
        "hooked": text(lambda: "fine"),
        "repeated": text(lambda: f"{TOKEN} " * 500 + DATABASE * 3),
        # A value across the head cut, another across the tail cut (limits: 4,096 bytes).
        "at_the_cut": text(lambda: head + TOKEN + "m" * 50_000 + DATABASE + "t" * 1990),
        "base64": text(lambda: f"b64 {b64(TOKEN)} {b64(DATABASE)}"),
        "base64_url_unpadded": text(lambda: b64(DATABASE, urlsafe=True, padded=False)),
        "url_encoded": text(lambda: f"?next={urllib.parse.quote(DATABASE, safe='')}"),
        "url_plus_encoded": text(lambda: urllib.parse.quote_plus(DATABASE)),
        "many_lines": text(lambda: "\n".join(f"line {n} {TOKEN}" for n in range(5000))),
        "embedded": text(
            lambda: [
                pegboard.Text("see"),
                pegboard.EmbeddedResource(uri=f"file:///{TOKEN}", text=f"x {DATABASE}"),
            ]
        ),
        "link": text(
            lambda: [
                pegboard.ResourceLink(
                    uri=f"https://example.test/?t={TOKEN}",
                    name=TOKEN,
                    title=DATABASE,
                    description=f"uses {TOKEN}",
                )
            ]
        ),
        "metadata": text(
            lambda: pegboard.ToolResponse(
                content="ok", metadata={"a": [{"b": {"c": [TOKEN, {"d": DATABASE}]}}]}
            )
        ),
        "metadata_key": text(lambda: pegboard.ToolResponse(content="ok", metadata={TOKEN: 1})),
        "provider_state": text(
            lambda: pegboard.ToolResponse(
                content="ok", provider_state={"anthropic": {"blocks": [{"text": b64(TOKEN)}]}}
            )
        ),
        "fails": pegboard.tool(description="Fail.", input=SCHEMA, execute=fails),
        "reports": pegboard.tool(description="Report.", input=SCHEMA, execute=reports),
        "reports_then_completes": pegboard.tool(
            description="Report.", input=SCHEMA, execute=reports_then_completes
        ),
        "outputs": pegboard.tool(
            description="Output.",
            input=SCHEMA,
            output={"type": "object"},
            execute=outputs,
        ),
        "wrong_output": pegboard.tool(
            description="Output.", input=SCHEMA, output=NUMBER, execute=wrong_output
        ),
        "bad_metadata": pegboard.tool(description="Meta.", input=SCHEMA, execute=bad_metadata),
        "strict_input": pegboard.tool(
            description="Number.", input=NUMBER, execute=lambda value, context: "never"
        ),
        "crashes": pegboard.tool(description="Crash.", input=SCHEMA, execute=crashes),
        # A definition holding secrets, as a mounted server's may.
        "described": pegboard.tool(
            description=f"Log in as {TOKEN}.",
            input={
                "type": "object",
                "properties": {"url": {"type": "string", "description": f"like {DATABASE}"}},
            },
            execute=lambda value, context: "ok",
        ),
    }
    return tools


class Rewriter:
    """A plugin whose execute_after hook puts a secret into one outcome."""

    @pegboard.hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome | None:
        if event.name != "hooked":
            return None
        return pegboard.Completed(None, (pegboard.Text(f"rewritten {DATABASE}"),))


ENV_SCRIPT = """\
import base64, json, os, sys
json.load(sys.stdin)
value = os.environ.get("TOKEN", "unset")
encoded = base64.b64encode(value.encode()).decode()
print(f"manifest {value} {encoded} other={os.environ.get('OTHER', 'unset')}")
"""

MANIFEST = f"""\
[[tools]]
name = "env"
description = "Print the token."
command = [{json.dumps(sys.executable)}, "env.py"]
"""


@pytest.fixture(scope="module")
def telemetry() -> Any:
    with installed() as telemetry:
        yield telemetry


@pytest.fixture
async def leaky(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    telemetry: Telemetry,
) -> AsyncIterator[tuple[pegboard.Location, list[pegboard.PermissionRequest]]]:
    telemetry.clear()
    (workspace / "env.py").write_text(ENV_SCRIPT)
    (workspace / "tools.toml").write_text(MANIFEST)
    asked: list[pegboard.PermissionRequest] = []

    async def yes(request: pegboard.PermissionRequest) -> str:
        asked.append(request)
        return "once"

    host.tools.register(leaking_tools())
    host.add_plugin("rewriter", Rewriter())
    servers = {"peer": {"command": [sys.executable, TRACE_PEER], "startup_timeout": 30,
                        "environment": {"TOKEN": TOKEN}}}  # fmt: skip
    plugins = [
        "builtin",
        {"name": "manifest", "options": {"files": ["tools.toml"]}},
        {"name": "mcp", "options": {"servers": servers}},
        "rewriter",
    ]
    async with host.location(
        workspace,
        plugins=plugins,
        trusted=["manifest", "mcp", "rewriter"],
        storage=storage_dir,
        limits=pegboard.OutputLimits(max_bytes=4096, max_lines=100),
        permissions=[
            {"action": "secret", "resource": "TOKEN", "effect": "allow"},
            {"action": "secret", "resource": "DATABASE_URL", "effect": "allow"},
        ],
        approver=yes,
        secrets=SECRETS,
        trace_content=True,
    ) as location:
        assert () == location.plugin_errors
        yield location, asked


#: Each call: (tool, input). Together with the tools above, the ways a secret can come out.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("hooked", {}),  # rewritten by the execute_after hook
    ("repeated", {}),
    ("at_the_cut", {}),
    ("base64", {}),
    ("base64_url_unpadded", {}),
    ("url_encoded", {}),
    ("url_plus_encoded", {}),
    ("many_lines", {}),
    ("embedded", {}),
    ("link", {}),
    ("metadata", {}),
    ("metadata_key", {}),
    ("fails", {}),
    ("reports", {}),
    ("reports_then_completes", {}),
    ("outputs", {}),
    ("wrong_output", {}),
    ("bad_metadata", {}),
    ("strict_input", {"n": TOKEN}),  # the model sends one back: the refusal quotes it
    (f"tool_{TOKEN}", {}),  # an unknown tool named with one
    ("plain", {"text": f"an argument holding {DATABASE}"}),  # recorded on the span
    ("bash", {"command": 'echo "$TOKEN and $DATABASE_URL"'}),
    ("bash", {"command": 'printf %s "$TOKEN" | base64'}),
    (
        "bash",
        {
            "command": "python3 -c 'import os,urllib.parse as u;"
            'print(u.quote(os.environ["DATABASE_URL"], safe=""))\''
        },
    ),
    # Past the head and tail the bash tool keeps: the spool file holds it all.
    ("bash", {"command": 'yes "x $TOKEN" | head -n 100000'}),
    ("bash", {"command": f"echo {TOKEN} >&2; exit 3"}),  # the approver sees the command
    ("bash", {"command": 'echo "${OTHER:-unset}"'}),
    ("env", {}),  # a manifest command
    ("peer_reveal", {"name": "TOKEN"}),  # a mounted MCP server
    ("peer_refuse", {"name": "TOKEN"}),
    ("provider_state", {}),  # kept verbatim for a provider, and in the durable form
]


async def test_no_secret_reaches_anything_published_or_kept(
    leaky: tuple[pegboard.Location, list[pegboard.PermissionRequest]],
    context: Context,
    storage_dir: Path,
    telemetry: Telemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """30 ways to emit a secret, scanned in the outcomes, their durable form, the progress
    the runner saw, the storage directory, the spans, the log and the approver's questions.
    """
    location, asked = leaky
    request = location.prepare()
    progress: list[pegboard.Progress] = []

    async def seen(update: pegboard.Progress) -> None:
        progress.append(update)

    outcomes: dict[str, pegboard.Outcome] = {}
    caplog.set_level(logging.DEBUG, logger="pegboard")
    for index, (name, arguments) in enumerate(CALLS):
        call = pegboard.ToolCall(name, arguments, context(call_id=f"call-{index}", progress=seen))
        outcome = await request.execute(call)
        outcomes[f"{index} {outcome.name}"] = outcome
    with pytest.raises(RuntimeError):  # a defect propagates: its span is still redacted
        await request.execute(pegboard.ToolCall("crashes", {}, context(call_id="defect")))
    published = [
        json.dumps(pegboard.dump_outcome(outcome), ensure_ascii=False)
        for outcome in outcomes.values()
    ]
    spans = [
        json.dumps({**dict(span.attributes or {}), "status": span.status.description})
        for span in telemetry.finished()
    ]
    assert len(CALLS) + 1 == sum(
        span.name.startswith("execute_tool ") for span in telemetry.finished()
    )
    assert [] == leaks(published)
    assert [] == leaks(repr(update) for update in progress)
    assert [] == leaks(files(storage_dir))
    assert [] == leaks(spans)
    assert [] == leaks(record.getMessage() for record in caplog.records)
    assert [] == leaks(repr(question) for question in asked)
    # The secrets were there to leak, and were replaced, not dropped:
    shown = {key: text_of(outcome) for key, outcome in outcomes.items()}
    assert "token=[secret TOKEN]" == shown["0 plain"]
    assert "rewritten [secret DATABASE_URL]" == shown["1 hooked"]
    assert "b64 [secret TOKEN] [secret DATABASE_URL]" == shown["4 base64"]
    assert "cannot log in with [secret TOKEN]" == shown["13 fails"]
    assert "partial 2: [secret DATABASE_URL]" in shown["14 reports"]
    assert "there is no tool named 'tool_[secret TOKEN]'" in shown["20 tool_[secret TOKEN]"]
    assert "[secret TOKEN] and [secret DATABASE_URL]" in shown["22 bash"]
    assert "unset" in shown["27 bash"]
    assert "manifest [secret TOKEN] [secret TOKEN] other=unset" in shown["28 env"]
    assert (
        "plain [secret TOKEN] base64 [secret TOKEN] url [secret TOKEN]" == shown["29 peer_reveal"]
    )
    assert "cannot use [secret TOKEN]" in shown["30 peer_refuse"]
    kept = outcomes["31 provider_state"]
    assert isinstance(kept, pegboard.Completed)
    assert {"anthropic": {"blocks": [{"text": "[secret TOKEN]"}]}} == kept.provider_state
    spooled = outcomes["25 bash"]
    assert isinstance(spooled, pegboard.Completed)
    assert spooled.metadata is not None
    assert spooled.metadata["spool"] is not None  # the spool file was scanned above
    assert any("[secret TOKEN]" in question.metadata.get("command", "") for question in asked)
    assert any("dropped metadata" in record.getMessage() for record in caplog.records)
    assert any("[secret TOKEN]" in update.message for update in progress if update.message)


def text_of(outcome: pegboard.Outcome) -> str:
    if isinstance(outcome, pegboard.Failed):
        parts = [outcome.error.message, *(getattr(i, "text", "") for i in outcome.partial)]
        return "\n".join(parts)
    return "\n".join(getattr(item, "text", "") for item in outcome.content)


async def test_only_granted_secrets_reach_commands(
    leaky: tuple[pegboard.Location, list[pegboard.PermissionRequest]], context: Context
) -> None:
    """A secret without an allow rule is not in a command's environment; granted ones are."""
    location, _ = leaky
    request = location.prepare()
    outcome = await request.execute(
        pegboard.ToolCall(
            "bash",
            {"command": 'echo "other=${OTHER:-unset} ${#TOKEN} ${#DATABASE_URL}"'},
            context(),
        )
    )
    assert isinstance(outcome, pegboard.Completed), outcome
    assert f"other=unset {len(TOKEN)} {len(DATABASE)}" in outcome.content[0].text  # type: ignore[union-attr]
    manifest = await request.execute(pegboard.ToolCall("env", {}, context()))
    assert "manifest [secret TOKEN] [secret TOKEN] other=unset" in manifest.content[0].text  # type: ignore[union-attr]


async def test_a_config_cannot_grant_a_secret(
    host: pegboard.Host, workspace: Path, context: Context
) -> None:
    """A Location's pegboard.toml may not allow: secrets come from the host alone."""
    (workspace / "pegboard.toml").write_text(
        '[[permissions]]\naction = "secret"\nresource = "TOKEN"\neffect = "allow"\n'
    )
    with pytest.raises(pegboard.ConfigError, match="may only deny or ask"):
        async with host.location(workspace, secrets={"TOKEN": TOKEN}):
            pass


async def test_a_config_deny_narrows_a_granted_secret(
    host: pegboard.Host, workspace: Path, context: Context
) -> None:
    """The host's grant, then the config's deny: the command does not get it."""
    (workspace / "pegboard.toml").write_text(
        '[[permissions]]\naction = "secret"\nresource = "TOKEN"\neffect = "deny"\n'
    )
    rules = [
        {"action": "secret", "resource": "*", "effect": "allow"},
        {"action": "bash", "resource": "*", "effect": "allow"},
    ]

    async def yes(request: pegboard.PermissionRequest) -> str:
        return "once"

    async with host.location(
        workspace, secrets={"TOKEN": TOKEN}, permissions=rules, approver=yes
    ) as location:
        outcome = await location.prepare().execute(
            pegboard.ToolCall("bash", {"command": 'echo "${TOKEN:-unset}"'}, context())
        )
    assert "unset" in outcome.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("secrets", "error"),
    [
        ({"TOKEN": "short"}, "the value of TOKEN has 5 characters, fewer than 8"),
        ({"NOT A NAME": TOKEN}, "'NOT A NAME' is not a valid name"),
        ({"TOKEN": 12345678}, "the value of TOKEN is a int, not a str"),
        ({"TOKEN": TOKEN + "\0"}, "the value of TOKEN holds a NUL character"),
        (["TOKEN"], "secrets= takes a mapping of names to values, got list"),
    ],
)
async def test_bad_secrets_are_refused_at_host_location(
    host: pegboard.Host, workspace: Path, secrets: Any, error: str
) -> None:
    """A short value would redact ordinary text: refused with one clear line."""
    with pytest.raises((ValueError, TypeError), match=error):
        async with host.location(workspace, plugins=[], secrets=secrets):
            pass


def test_redaction_covers_the_encodings_and_a_value_split_across_file_blocks(
    tmp_path: Path,
) -> None:
    """The forms of a value, and one straddling the block boundary of a redacted file."""
    secrets = pegboard.Secrets(SECRETS)
    for form in FORBIDDEN:
        assert [] == leaks([secrets.redact(f"<{form}>")])
    path = tmp_path / "spool.txt"
    block = 1 << 20
    path.write_bytes(b"a" * (block - 5) + TOKEN.encode() + b"b" * 10 + DATABASE.encode())
    secrets.redact_file(path)
    assert (
        b"a" * (block - 5) + b"[secret TOKEN]" + b"b" * 10 + b"[secret DATABASE_URL]"
        == path.read_bytes()
    )
    # The longer secret wins where one value holds another.
    nested = pegboard.Secrets({"INNER": "abcdefgh", "OUTER": "xx-abcdefgh-yy"})
    assert "[secret OUTER] [secret INNER]" == nested.redact("xx-abcdefgh-yy abcdefgh")


def test_two_values_that_overlap_in_one_string_are_both_redacted_whole() -> None:
    """Where one value ends with what another begins with, the whole stretch goes, under
    both marks: replacing the first would leave the rest of the second readable."""
    secrets = pegboard.Secrets({"A": "abcdefgh12", "B": "gh12345678"})
    text = "x abcdefgh12345678 y, abcdefgh12 and gh12345678"
    assert "x [secret A][secret B] y, [secret A] and [secret B]" == secrets.redact(text)
    assert b"x [secret A][secret B] y, [secret A] and [secret B]" == secrets.redact_bytes(
        text.encode()
    )


def test_what_is_not_covered_is_not_redacted() -> None:
    """A value the tool splits or reverses is not recognized (documented)."""
    secrets = pegboard.Secrets({"TOKEN": TOKEN})
    split = f"{TOKEN[:5]} {TOKEN[5:]}"
    assert split == secrets.redact(split)
    assert TOKEN[::-1] == secrets.redact(TOKEN[::-1])


async def test_pegboard_serve_responses_hold_no_secret(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """What an MCP client reads: tool results, errors, structured content, resource reads."""
    host.tools.register(leaking_tools())
    async with host.location(
        workspace, plugins=[], storage=storage_dir, secrets=SECRETS,
        limits=pegboard.OutputLimits(max_bytes=4096, max_lines=100),
    ) as location:  # fmt: skip
        responses = []
        async with Client(pegboard.mcp.build_server(location)) as client:
            for name in ("plain", "at_the_cut", "outputs", "fails", "link", "metadata"):
                result = await client.call_tool(name, {})
                responses.append(result.model_dump_json(by_alias=True))
                for item in result.content:
                    if isinstance(item, types.ResourceLink) and item.uri.startswith("pegboard"):
                        read = await client.read_resource(item.uri)
                        responses.append(read.model_dump_json())
            unknown = await client.call_tool(f"x{TOKEN}", {})
            responses.append(unknown.model_dump_json())
            listed = await client.list_tools()
            responses.append(listed.model_dump_json(by_alias=True))
    assert [] == leaks(responses)
    assert any("[secret TOKEN]" in response for response in responses)
    # A definition can hold a secret too (a mounted server's, say): tools/list shows none.
    assert "Log in as [secret TOKEN]." in responses[-1]
    assert "[secret DATABASE_URL]" in responses[-1]


def test_pegboard_call_prints_no_secret(tmp_path: Path) -> None:
    """`pegboard call --secret NAME` redacts the outcome it prints, and its errors."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    environment = {**os.environ, "TOKEN": TOKEN, "DATABASE_URL": DATABASE}
    command = [sys.executable, "-m", "pegboard", "call", "--location", str(workspace),
               "--secret", "TOKEN", "--secret", "DATABASE_URL", "--allow", "secret:TOKEN",
               "--allow", "secret:DATABASE_URL", "--allow", "bash", "--yes", "--json",
               "bash"]  # fmt: skip
    line = 'echo "$TOKEN"; printf %s "$DATABASE_URL" | base64; echo "$DATABASE_URL"'
    shown = subprocess.run(
        [*command, f"command={line}"],
        capture_output=True, text=True, env=environment, timeout=120, check=False,
    )  # fmt: skip
    assert 0 == shown.returncode, shown.stderr
    assert "[secret TOKEN]" in shown.stdout
    assert 2 == shown.stdout.count("[secret DATABASE_URL]")
    assert [] == leaks([shown.stdout, shown.stderr])
    missing = subprocess.run(
        [*command[:-1], "--secret", "NOT_SET_ANYWHERE", "bash", "command=true"],
        capture_output=True, text=True, env=environment, timeout=120, check=False,
    )  # fmt: skip
    assert 2 == missing.returncode
    assert "--secret NOT_SET_ANYWHERE: the environment has no variable" in missing.stderr
    short = subprocess.run(
        [*command[:-1], "--secret", "SHORT", "bash", "command=true"],
        capture_output=True, text=True, env={**environment, "SHORT": "abc"}, timeout=120,
        check=False,
    )  # fmt: skip
    assert 2 == short.returncode
    assert "the value of SHORT has 3 characters" in short.stderr


ENVIRONMENT_PLUGIN = """
import os
import re
import shutil

import pegboard


async def show(input, context):
    return f"token={os.environ.get('TOKEN', 'unset')} other={os.environ.get('OTHER', 'unset')}"


@pegboard.hookimpl
def activate_location(tools):
    tools.register({"show": pegboard.tool(description="Show.", execute=show,
                                          input={"type": "object"})})


class Plugin:
    activate_location = staticmethod(activate_location)
"""


@pytest.mark.skipif(
    pegboard.sandbox.detect("required").reason is not None, reason="no sandbox confines here"
)
async def test_a_confined_plugin_gets_only_granted_secrets(
    tmp_path: Path, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A confined worker's environment holds a secret only where a host rule grants it."""
    folder = tmp_path / "loose"
    folder.mkdir()
    module = f"pegboard_secret_plugin_{tmp_path.name.replace('-', '_')}"
    (folder / f"{module}.py").write_text(ENVIRONMENT_PLUGIN)
    sys.path.insert(0, str(folder))
    try:
        host = pegboard.Host()
        host.add_plugin("shower", f"{module}:Plugin")
        for rules, expected in [
            ([{"action": "secret", "resource": "TOKEN", "effect": "allow"}],
             "token=[secret TOKEN] other=unset"),
            ([], "token=unset other=unset"),
        ]:  # fmt: skip
            async with host.location(
                workspace, plugins=["shower"], storage=storage_dir, secrets=SECRETS,
                permissions=rules,
            ) as location:  # fmt: skip
                assert () == location.plugin_errors
                assert [True] == [info.confined for info in location.plugin_info]
                outcome = await location.prepare().execute(pegboard.ToolCall("show", {}, context()))
            assert expected == text_of(outcome)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(module, None)


async def test_a_tools_log_messages_hold_no_secret(
    workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A log message, its data at any depth, encoded or not: the runner sees none."""

    @pegboard.tool(description="Log the token.", input={"type": "object"})
    async def chatty(input: object, context: pegboard.ToolContext) -> str:
        await context.log("info", f"using {TOKEN}", {"deep": [{"url": DATABASE}], "b": b64(TOKEN)})
        return "done"

    received: list[pegboard.ToolLog] = []

    async def log(record: pegboard.ToolLog) -> None:
        received.append(record)

    host = pegboard.Host()
    async with host.location(
        workspace, plugins=[], storage=storage_dir, secrets=SECRETS
    ) as location:
        location.tools.register({"chatty": chatty})
        call = pegboard.ToolCall("chatty", "{}", context(log=log))
        await location.prepare().execute(call)
    assert [
        pegboard.ToolLog(
            "info",
            "using [secret TOKEN]",
            {"deep": [{"url": "[secret DATABASE_URL]"}], "b": "[secret TOKEN]"},
        )
    ] == received
    assert [] == leaks(json.dumps(attrs.asdict(record)) for record in received)


async def test_the_mcp_servers_log_holds_no_secret(
    host: pegboard.Host, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool that raises with a value in `pegboard serve`: the client gets a fixed message,
    and the log record of the defect (on the `pegboard.mcp` logger) is redacted, traceback too.
    """

    async def crashes(input: Any, context: pegboard.ToolContext) -> str:
        try:
            raise KeyError(DATABASE)
        except KeyError as error:
            raise RuntimeError(f"bug near {TOKEN}") from error

    host.tools.register(
        {"crashes": pegboard.tool(description="Crash.", input=SCHEMA, execute=crashes)}
    )
    caplog.set_level(logging.DEBUG, logger="pegboard")
    async with (
        host.location(workspace, plugins=[], secrets=SECRETS) as location,
        Client(pegboard.mcp.build_server(location)) as client,
    ):
        with pytest.raises(Exception, match="internal error") as error:
            await client.call_tool("crashes", {})
    records = [record for record in caplog.records if record.name == "pegboard.mcp"]
    assert records, "the defect is logged on the pegboard.mcp logger"
    shown = [logging.Formatter().format(record) for record in records]
    assert [] == leaks([*shown, str(error.value)])
    assert any("bug near [secret TOKEN]" in text for text in shown)
    assert any("KeyError: '[secret DATABASE_URL]'" in text for text in shown)


def test_every_logger_pegboard_writes_to_is_redacted() -> None:
    """Each logger name in pegboard's sources redacts: a logger's filter does not see the
    records of its children, so a new ``pegboard.x`` logger must be listed too.
    """
    from pegboard._secrets import LOGGERS

    root = Path(__file__).resolve().parent.parent
    named = {
        match
        for folder in ("core", "plugins_builtin")
        for path in (root / folder).rglob("*.py")
        for match in re.findall(r"getLogger\(\s*[\"']([^\"']+)[\"']", path.read_text())
    }
    assert {"pegboard", "pegboard.mcp"} <= named
    assert set() == named - set(LOGGERS)
    secrets = pegboard.Secrets({"TOKEN": TOKEN})
    with pegboard._secrets.redacting_logs(secrets):
        for name in LOGGERS:
            record = logging.LogRecord(name, logging.ERROR, __file__, 1, "%s", (TOKEN,), None)
            logging.getLogger(name).filter(record)
            assert "[secret TOKEN]" == record.getMessage(), name


async def test_a_secret_of_digits_is_redacted_from_numbers_too(
    workspace: Path, storage_dir: Path, context: Context
) -> None:
    """An account number as a secret, returned as a JSON number in the output or metadata:
    it becomes the redacted text; numbers that hold no value stay numbers.
    """
    account = "4111111111111111"

    @pegboard.tool(description="Account.", input={"type": "object"}, output={"type": "object"})
    async def lookup(input: object, context: pegboard.ToolContext) -> pegboard.ToolResponse:
        return pegboard.ToolResponse(
            output={"account": int(account), "balance": 12.5, "big": float(account)},
            content="found",
            metadata={"rows": [{"account": int(account)}], "count": 123456789, "ok": True},
        )

    host = pegboard.Host()
    async with host.location(
        workspace, plugins=[], storage=storage_dir, secrets={"ACCOUNT": account}
    ) as location:
        location.tools.register({"lookup": lookup})
        outcome = await location.prepare().execute(pegboard.ToolCall("lookup", {}, context()))
    assert isinstance(outcome, pegboard.Completed), outcome
    assert {
        "account": "[secret ACCOUNT]",
        "balance": 12.5,
        "big": "[secret ACCOUNT].0",
    } == outcome.output
    assert {
        "rows": [{"account": "[secret ACCOUNT]"}],
        "count": 123456789,
        "ok": True,
    } == outcome.metadata
    assert account not in json.dumps(pegboard.dump_outcome(outcome))


async def test_pegboard_serve_secret_takes_the_value_from_the_environment(
    workspace: Path, tmp_path: Path
) -> None:
    """`pegboard serve --secret NAME` as a client starts it: a granted command gets the
    value, and no response or line of the server's log holds it.
    """
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    arguments = ["--debug", "serve", "-l", str(workspace), "--secret", "TOKEN", "--secret",
                 "DATABASE_URL", "--allow", "secret:TOKEN", "--allow", "bash"]  # fmt: skip
    environment = {"TOKEN": TOKEN, "DATABASE_URL": DATABASE, "PATH": os.environ["PATH"],
                   "XDG_DATA_HOME": str(tmp_path / "data")}  # fmt: skip
    server = StdioServerParameters(command=command, args=arguments, env=environment)
    line = 'echo "$TOKEN ${#TOKEN} ${DATABASE_URL:-unset}"; printf %s "$TOKEN" | base64'
    log = tmp_path / "serve.log"
    with log.open("w") as errors:
        async with Client(stdio_client(server, errlog=errors)) as client:
            shown = await client.call_tool("bash", {"command": line})
            unknown = await client.call_tool(f"x{TOKEN}", {})
    responses = [shown.model_dump_json(), unknown.model_dump_json()]
    assert [] == leaks([*responses, log.read_text()])
    text = shown.content[0].text  # type: ignore[union-attr]
    assert f"[secret TOKEN] {len(TOKEN)} unset\n[secret TOKEN]" in text
    assert "x[secret TOKEN]" in unknown.content[0].text  # type: ignore[union-attr]


async def test_an_always_approval_saves_no_secret(
    workspace: Path, storage_dir: Path, context: Context
) -> None:
    """The approver answers "always" to commands that hold a value: the approvals file never
    holds it. A pattern that would have held it covers nothing: its command asks again.
    """
    asked: list[pegboard.PermissionRequest] = []

    async def always(request: pegboard.PermissionRequest) -> str:
        asked.append(request)
        return "always"

    host = pegboard.Host()
    async with host.location(
        workspace, storage=storage_dir, secrets=SECRETS, approver=always
    ) as location:
        request = location.prepare()
        # "echo *" is saved, and covers the second; "<value> *" would be, and is not.
        for index, command in enumerate(
            [f"echo {TOKEN} >/dev/null", "echo again", f"{TOKEN} --help", f"{TOKEN} --help"]
        ):
            call = pegboard.ToolCall("bash", {"command": command}, context(call_id=f"c{index}"))
            await request.execute(call)
    saved = pegboard._permissions.default_approvals_file(workspace.resolve())
    assert [] == leaks([saved.read_text()])
    assert "echo *" in saved.read_text()
    assert ["echo [secret TOKEN]", "[secret TOKEN] --help", "[secret TOKEN] --help"] == [
        question.resources[0] for question in asked
    ]
    assert [] == leaks(repr(question) for question in asked)


async def test_a_span_shows_no_secret_the_runner_put_in_its_ids(
    leaky: tuple[pegboard.Location, list[pegboard.PermissionRequest]],
    context: Context,
    telemetry: Telemetry,
) -> None:
    """The call, conversation and agent IDs the runner gives are span attributes too: a
    secret in them is redacted like one a tool returns."""
    location, _ = leaky
    ids = {"call_id": f"call-{TOKEN}", "session_id": f"session-{TOKEN}", "agent": f"{TOKEN}"}
    await location.prepare().execute(pegboard.ToolCall("plain", {"text": "x"}, context(**ids)))
    [span] = [span for span in telemetry.finished() if span.name == "execute_tool plain"]
    attributes = dict(span.attributes or {})
    assert [] == leaks([json.dumps(attributes)])
    assert ("call-[secret TOKEN]", "session-[secret TOKEN]", "[secret TOKEN]") == (
        attributes["gen_ai.tool.call.id"],
        attributes["gen_ai.conversation.id"],
        attributes["gen_ai.agent.name"],
    )
