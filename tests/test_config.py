"""A Location's pegboard.toml: plugins, options and output limits, never trust."""

from __future__ import annotations

from pathlib import Path

import pytest

import pegboard
from pegboard import hookimpl

pytestmark = pytest.mark.anyio


class Remember:
    def __init__(self) -> None:
        self.options: list[dict[str, object]] = []

    @hookimpl
    def activate_location(self, options: dict[str, object]) -> None:
        self.options.append(options)


async def test_config_enables_plugins_with_options_and_sets_limits(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """plugins=None reads the plugin list and [tool_output] from pegboard.toml."""
    plugin = Remember()
    host.add_plugin("notes", plugin)
    (workspace / "pegboard.toml").write_text(
        'plugins = ["builtin", {name = "notes", options = {depth = 2}}]\n'
        "[tool_output]\nmax_lines = 500\nmax_bytes = 20000\n"
    )
    async with host.location(workspace, storage=storage_dir) as location:
        assert ("builtin", "notes") == location.plugins
        assert [{"depth": 2}] == plugin.options
        assert pegboard.OutputLimits(max_lines=500, max_bytes=20000) == location.limits


async def test_a_table_named_after_a_plugin_holds_its_options(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """[notes] gives options to the notes plugin; options in the plugin list win."""
    plugin = Remember()
    host.add_plugin("notes", plugin)
    (workspace / "pegboard.toml").write_text(
        'plugins = [{name = "notes", options = {depth = 2}}]\n[notes]\ndepth = 1\nwidth = 3\n'
    )
    async with host.location(workspace, storage=storage_dir):
        pass
    assert [{"depth": 2, "width": 3}] == plugin.options


async def test_host_arguments_take_precedence_over_the_config(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Explicit plugins= and limits= win over what the file says."""
    config = 'plugins = ["builtin"]\n[tool_output]\nmax_lines = 9\n'
    (workspace / "pegboard.toml").write_text(config)
    limits = pegboard.OutputLimits(max_lines=100)
    async with host.location(workspace, plugins=[], limits=limits, storage=storage_dir) as loc:
        assert () == loc.plugins
        assert limits == loc.limits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("plugins = [", "not valid TOML"),
        ('plugins = "builtin"', "plugins: expected array, got string"),
        ("plugins = [3]", "plugins[0]"),
        ('plugins = [{name = "builtin", options = 3}]', "plugins[0]"),
        ('plugins = ["nope"]', "plugin 'nope' (enabled by"),
        ('plugins = ["builtin", "builtin"]', "enabled twice"),
        ("[tool_output]\nmax_lines = 'many'", "tool_output.max_lines: expected integer"),
        ("[tool_output]\nmax_line = 3", "unexpected property 'max_line'"),
        ("[tool_output]\nmax_bytes = 10", "tool_output.max_bytes: 10 is less than"),
        ('trusted = ["notes"]', "cannot grant trust"),
        ("colour = 'blue'", "colour: expected object"),
        ("[colour]\nshade = 'blue'", "[colour] is neither a pegboard setting"),
    ],
)
async def test_bad_config_is_a_clear_error_naming_file_and_key(
    host: pegboard.Host, workspace: Path, storage_dir: Path, text: str, message: str
) -> None:
    """A malformed file, a wrong type or an unknown key names the file and the key."""
    (workspace / "pegboard.toml").write_text(text)
    with pytest.raises(pegboard.ConfigError) as caught:
        async with host.location(workspace, storage=storage_dir):
            pytest.fail("the Location must not open")
    assert str(workspace / "pegboard.toml") in str(caught.value)
    assert message in str(caught.value)


#: Values nested 5,000 deep: deeper than the TOML parser's recursion can go.
TOO_DEEP_TO_PARSE = {
    "arrays": "a = " + "[" * 5000 + "]" * 5000,
    "inline tables": "a = " + "{b = " * 5000 + "1" + "}" * 5000,
}


@pytest.mark.parametrize("text", TOO_DEEP_TO_PARSE.values(), ids=TOO_DEEP_TO_PARSE.keys())
async def test_a_config_nested_too_deeply_to_parse_is_a_config_error_naming_the_file(
    host: pegboard.Host, workspace: Path, storage_dir: Path, text: str
) -> None:
    """Nesting the parser cannot follow is a ConfigError naming the file, not a RecursionError."""
    (workspace / "pegboard.toml").write_text(text + "\n")
    with pytest.raises(pegboard.ConfigError) as caught:
        async with host.location(workspace, storage=storage_dir):
            pytest.fail("the Location must not open")
    expected = (
        f"{workspace / 'pegboard.toml'}: arrays or tables nest too deeply to parse; "
        "keep every value within 64 levels"
    )
    assert expected == str(caught.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[notes]\nx = " + "[" * 65 + "]" * 65, "notes"),
        ("notes = " + "{b = " * 65 + "1" + "}" * 65, "notes"),
        (
            'plugins = [{name = "notes", options = ' + "{b = " * 64 + "1" + "}" * 64 + "}]",
            "plugins",
        ),
    ],
    ids=["array", "table", "plugin options"],
)
async def test_a_config_value_deeper_than_64_levels_is_refused_before_validation(
    host: pegboard.Host, workspace: Path, storage_dir: Path, text: str, key: str
) -> None:
    """A value the parser returns nested past 64 levels is named; no plugin ever sees it."""
    plugin = Remember()
    host.add_plugin("notes", plugin)
    (workspace / "pegboard.toml").write_text(text + "\n")
    with pytest.raises(pegboard.ConfigError) as caught:
        async with host.location(workspace, storage=storage_dir):
            pytest.fail("the Location must not open")
    expected = (
        f"{workspace / 'pegboard.toml'}: {key}: nests deeper than 64 levels; "
        "flatten the arrays and tables within it"
    )
    assert expected == str(caught.value)
    assert [] == plugin.options


async def test_a_config_value_64_levels_deep_is_read(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """64 levels of tables, the limit itself, reach the plugin as written."""
    plugin = Remember()
    host.add_plugin("notes", plugin)
    (workspace / "pegboard.toml").write_text("notes = " + "{b = " * 63 + "1" + "}" * 63 + "\n")
    async with host.location(workspace, plugins=["notes"], storage=storage_dir):
        pass
    (options,) = plugin.options
    for _ in range(63):
        options = options["b"]  # type: ignore[assignment]
    assert 1 == options


async def test_law_host_authority_config_cannot_grant_trust(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Enabling a plugin in the config gives it no trust; only the host grants trust."""
    seen: list[pegboard.Services] = []

    class Probe:
        @hookimpl
        def activate_location(self, services: pegboard.Services) -> None:
            seen.append(services)

    host.add_plugin("probe", Probe())
    (workspace / "pegboard.toml").write_text('plugins = ["probe"]\n')
    async with host.location(workspace, storage=storage_dir):
        pass
    async with host.location(workspace, storage=storage_dir, trusted=["probe"]):
        pass
    assert [False, True] == [services.trusted for services in seen]


async def test_law_host_authority_config_cannot_allow(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """An allow rule in pegboard.toml is refused: rules that allow come from the host."""
    (workspace / "pegboard.toml").write_text(
        'permissions = [{action = "read", resource = "*", effect = "allow"}]\n'
    )
    with pytest.raises(pegboard.ConfigError, match=r"permissions\[0\].*allow come from the host"):
        async with host.location(workspace, storage=storage_dir):
            pass


async def test_law_host_authority_config_rules_come_after_the_hosts(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The config's deny and ask rules follow the host's, so they narrow its allows."""
    (workspace / "pegboard.toml").write_text(
        "[[permissions]]\naction = 'read'\nresource = '.env'\neffect = 'deny'\n"
        "[[permissions]]\naction = 'bash'\nresource = 'rm *'\neffect = 'ask'\n"
    )
    allow = [{"action": "read", "resource": "*", "effect": "allow"}, {"action": "bash",
             "resource": "*", "effect": "allow"}]  # fmt: skip
    async with host.location(workspace, storage=storage_dir, permissions=allow) as location:
        evaluate = location.permissions.evaluate
        assert ["allow", "deny", "allow", "ask"] == [
            evaluate("read", "README.md"),
            evaluate("read", ".env"),
            evaluate("bash", "ls"),
            evaluate("bash", "rm -rf x"),
        ]


async def test_law_host_authority_config_ask_never_lifts_a_host_deny(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A config ask after a host deny still denies: asking would widen the host's rule."""
    (workspace / "pegboard.toml").write_text(
        "permissions = [{action = 'bash', effect = 'ask'}]\n"  # resource defaults to *
    )
    rules = [
        {"action": "bash", "resource": "*", "effect": "allow"},
        {"action": "bash", "resource": "rm *", "effect": "deny"},
        {"action": "bash", "resource": "rm -i *", "effect": "allow"},
    ]
    async with host.location(workspace, storage=storage_dir, permissions=rules) as location:
        evaluate = location.permissions.evaluate
        assert ["ask", "deny", "ask"] == [
            evaluate("bash", "ls"),
            evaluate("bash", "rm -rf /"),
            evaluate("bash", "rm -i x"),
        ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("permissions = 'deny'\n", 'permissions: expected array, got string "deny"'),
        ("permissions = [{action = 'read', effect = 'maybe'}]\n", "permissions[0]"),
        ("permissions = [{resource = 'x', effect = 'deny'}]\n", "'action' is a required"),
        ("permissions = [{action = 'read', effect = 'deny', why = 1}]\n", "permissions[0]"),
    ],
)
async def test_bad_config_rules_are_config_errors(
    host: pegboard.Host, workspace: Path, storage_dir: Path, text: str, message: str
) -> None:
    """A malformed rule in pegboard.toml names the file and the entry."""
    (workspace / "pegboard.toml").write_text(text)
    with pytest.raises(pegboard.ConfigError, match=r"pegboard\.toml") as raised:
        async with host.location(workspace, storage=storage_dir):
            pass
    assert message in str(raised.value)


async def test_host_rules_are_checked_with_clear_errors(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """permissions= entries that are not rules are a ConfigError naming the entry."""
    with pytest.raises(pegboard.ConfigError, match=r"permissions=\[1\]: effect must be"):
        async with host.location(
            workspace,
            storage=storage_dir,
            permissions=[{"action": "read", "effect": "allow"}, {"action": "x", "effect": "no"}],
        ):
            pass
