"""Installed plugins: discovery through real entry-point metadata, loading on first use."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from distributions import install_plugin

import pegboard

pytestmark = pytest.mark.anyio

Install = Callable[..., str]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Install a plugin as a distribution: a module plus a dist-info with entry_points.txt."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    prefix = f"pegboard_test_{tmp_path.name.replace('-', '_')}"

    def install(name: str, source: str, *, distribution: str = "") -> str:
        return install_plugin(
            site,
            name,
            source,
            module=f"{prefix}_{name}",
            distribution=distribution or f"{name}-plugin",
            version="1.2.3",
        )

    yield install
    for module in [name for name in sys.modules if name.startswith(prefix)]:
        del sys.modules[module]


NOTES = """
    import pegboard

    @pegboard.tool(description="Count notes.")
    async def count(input, context):
        return "3 notes"

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({"count": count}, namespace="notes")
"""


async def test_an_installed_plugin_is_enabled_for_one_location_and_not_another(
    install: Install, tmp_path: Path, storage_dir: Path, context: Callable[..., object]
) -> None:
    """A plugin declared by an entry point runs where enabled and is absent elsewhere."""
    install("notes", NOTES)
    host = pegboard.Host()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with host.location(tmp_path / "a", plugins=["notes"], storage=storage_dir) as one:
        request = one.prepare()
        assert ["notes_count"] == [definition.name for definition in request.definitions]
        outcome = await request.execute(pegboard.ToolCall("notes_count", "{}", context()))
        assert (pegboard.Text("3 notes"),) == outcome.content  # type: ignore[union-attr]
    async with host.location(tmp_path / "b", plugins=[], storage=storage_dir) as other:
        assert () == other.prepare().definitions


async def test_plugins_are_imported_only_when_enabled(
    install: Install, workspace: Path, storage_dir: Path
) -> None:
    """Discovery reads metadata only; the module is imported when a Location enables it."""
    module = install("lazy", NOTES)
    host = pegboard.Host()
    infos = {info.name: info for info in host.plugins()}
    assert pegboard.PluginInfo("lazy", "lazy-plugin", "1.2.3", "not loaded") == infos["lazy"]
    assert module not in sys.modules
    async with host.location(workspace, plugins=[], storage=storage_dir):
        assert module not in sys.modules
    # In the host's process (confine="off"): an untrusted one is never imported here.
    async with host.location(workspace, plugins=["lazy"], storage=storage_dir, confine="off"):
        assert module in sys.modules
    assert "loaded" == {info.name: info for info in host.plugins()}["lazy"].state


async def test_the_entry_point_scan_happens_once_per_host(
    install: Install, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening many Locations scans the installed entry points once."""
    import importlib_metadata

    install("notes", NOTES)
    scans: list[str] = []
    real = importlib_metadata.entry_points

    def counting(**selection: str) -> importlib_metadata.EntryPoints:
        scans.append(selection.get("group", ""))
        return real(**selection)

    monkeypatch.setattr(importlib_metadata, "entry_points", counting)
    host = pegboard.Host()
    for _ in range(3):
        async with host.location(workspace, plugins=["notes"], storage=storage_dir):
            pass
    assert ["pegboard"] == scans


async def test_built_in_plugins_are_enabled_without_the_entry_point_scan(
    install: Install, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only built-in plugins enabled: no distribution is read; any other name scans once."""
    import importlib_metadata

    install("notes", NOTES)
    install("builtin", NOTES, distribution="impostor")
    scans: list[str] = []
    real = importlib_metadata.entry_points

    def counting(**selection: str) -> importlib_metadata.EntryPoints:
        scans.append(selection.get("group", ""))
        return real(**selection)

    monkeypatch.setattr(importlib_metadata, "entry_points", counting)
    host = pegboard.Host()
    async with host.location(workspace, storage=storage_dir) as location:
        assert ("builtin",) == location.plugins
        assert "read" in {definition.name for definition in location.prepare().definitions}
    (workspace / "pegboard.toml").write_text('plugins = ["builtin"]\n[builtin]\n')
    async with host.location(workspace, storage=storage_dir) as location:
        assert ("builtin",) == location.plugins
    assert [] == scans
    async with host.location(workspace, plugins=["builtin", "notes"], storage=storage_dir) as both:
        assert ("builtin", "notes") == both.plugins
        assert "notes_count" in {definition.name for definition in both.prepare().definitions}
    assert ["pegboard"] == scans
    # The scan never lets an entry point take a built-in name.
    builtin = {info.name: info for info in host.plugins()}["builtin"]
    assert ("pegboard", "loaded") == (builtin.distribution, builtin.state)


async def test_opening_a_location_reads_no_distribution_metadata(
    install: Install, workspace: Path, storage_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names come from entry_points.txt; METADATA is parsed only when plugins are listed."""
    import importlib_metadata

    install("notes", NOTES)
    reads: list[str] = []
    real = importlib_metadata.Distribution.metadata

    def counting(dist: importlib_metadata.Distribution) -> object:
        reads.append(str(getattr(dist, "_path", dist)))
        return real.__get__(dist)

    monkeypatch.setattr(importlib_metadata.Distribution, "metadata", property(counting))
    host = pegboard.Host()
    async with host.location(workspace, plugins=["builtin", "notes"], storage=storage_dir):
        pass
    assert [] == reads
    infos = {info.name: info for info in host.plugins()}
    assert ("notes-plugin", "1.2.3") == (infos["notes"].distribution, infos["notes"].version)
    assert "pegboard" == infos["builtin"].distribution
    assert reads


async def test_a_plugin_that_fails_to_import_is_recorded_and_harmless(
    install: Install, workspace: Path, storage_dir: Path
) -> None:
    """An import error is recorded on the Location and shown by host.plugins(load=True)."""
    install("broken", "import nonexistent_module_for_pegboard_tests\n")
    install("notes", NOTES)
    host = pegboard.Host()
    enabled = ["broken", "notes"]
    async with host.location(workspace, plugins=enabled, storage=storage_dir) as location:
        [error] = location.plugin_errors
        assert ("broken", "import") == (error.plugin, error.phase)
        assert "No module named 'nonexistent_module_for_pegboard_tests'" in error.message
        assert ["notes_count"] == [d.name for d in location.prepare().definitions]
    info = {info.name: info for info in host.plugins(load=True)}["broken"]
    assert ("failed", False) == (info.state, info.loads)
    assert "nonexistent_module_for_pegboard_tests" in str(info.error)


async def test_a_distribution_without_a_version_is_still_discovered(
    install: Install, tmp_path: Path, workspace: Path, storage_dir: Path
) -> None:
    """Incomplete metadata in one distribution never breaks discovery."""
    install("notes", NOTES)
    info = next((tmp_path / "site").glob("notes_plugin-*.dist-info"))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notes-plugin\n")
    host = pegboard.Host()
    assert pegboard.PluginInfo("notes", "notes-plugin", None, "not loaded") == next(
        info for info in host.plugins() if info.name == "notes"
    )
    async with host.location(workspace, plugins=["notes"], storage=storage_dir) as location:
        assert ("notes",) == location.plugins


async def test_plugins_load_reports_every_installed_plugin(install: Install) -> None:
    """host.plugins(load=True) imports each plugin and reports whether it loads."""
    install("notes", NOTES)
    host = pegboard.Host()
    infos = {info.name: info for info in host.plugins(load=True)}
    assert infos["notes"].loads
    assert infos["builtin"].loads
    assert ("builtin", "pegboard") == (infos["builtin"].name, infos["builtin"].distribution)


async def test_builtin_is_enabled_by_default_and_can_be_disabled(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """plugins=None with no config enables builtin alone; plugins=[] enables nothing."""
    async with host.location(workspace, storage=storage_dir) as default:
        assert ("builtin",) == default.plugins
    async with host.location(workspace, plugins=[], storage=storage_dir) as bare:
        assert () == bare.plugins


async def test_an_in_process_plugin_cannot_shadow_an_installed_name(host: pegboard.Host) -> None:
    """add_plugin refuses a name that is already installed."""
    with pytest.raises(ValueError, match="'builtin' is already installed"):
        host.add_plugin("builtin", object())


async def test_a_plugin_that_exits_on_import_is_recorded_and_harmless(
    install: Install, workspace: Path, storage_dir: Path
) -> None:
    """sys.exit() in a plugin's module fails that plugin alone, as an import failure."""
    install("exits", "import sys\nsys.exit('no config found')\n")
    install("notes", NOTES)
    host = pegboard.Host()
    enabled = ["exits", "notes"]
    async with host.location(workspace, plugins=enabled, storage=storage_dir) as location:
        [error] = location.plugin_errors
        assert ("exits", "import") == (error.plugin, error.phase)
        assert "SystemExit: no config found" == error.message
        assert ["notes_count"] == [d.name for d in location.prepare().definitions]
    assert "SystemExit" in str({i.name: i for i in host.plugins(load=True)}["exits"].error)


async def test_a_keyboard_interrupt_during_import_is_the_users(
    install: Install, workspace: Path, storage_dir: Path
) -> None:
    """Ctrl-C while a plugin imports in the host's process stops the program: it is not a
    plugin failure. (Confined, the import happens in the plugin's worker.)"""
    install("interrupted", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        async with pegboard.Host().location(
            workspace, plugins=["interrupted"], storage=storage_dir, confine="off"
        ):
            pass


@pytest.mark.parametrize(
    "definition",
    [
        "async def prepare_request(definitions):\n    definitions.clear()\n",
        "def prepare_request(definitions):\n    definitions.clear()\n    yield\n",
        "async def prepare_request(definitions):\n    definitions.clear()\n    yield\n",
    ],
    ids=["coroutine", "generator", "async-generator"],
)
async def test_a_prepare_request_that_is_not_a_plain_function_is_refused_on_load(
    install: Install, workspace: Path, storage_dir: Path, definition: str
) -> None:
    """location.prepare() is synchronous: an async prepare_request would silently never run,
    so the plugin fails to load, with a message that says what to write instead."""
    install(
        "narrowing",
        NOTES + "\n    @pegboard.hookimpl\n" + textwrap.indent(definition, "    "),
    )
    host = pegboard.Host()
    async with host.location(workspace, plugins=["narrowing"], storage=storage_dir) as location:
        [error] = location.plugin_errors
        assert ("narrowing", "import") == (error.plugin, error.phase)
        assert "'prepare_request'" in error.message
        assert "make it a plain function (def, not async def, no yield)" in error.message
        assert () == location.plugins
        assert () == location.prepare().definitions
